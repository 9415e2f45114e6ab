"""What a node holds in OVN, found by its name, and its release (ovnaccess, one transaction per database).

In the northbound database a node's PrismNET agent owns (cni/): its pods' logical switch ports and
its management port (external_ids `prismnet.node=<node>`), the management switch
`k8s-mgmt.<node>` with its router port, the egress policy and pod address set on the cluster
router (`prismnet.node`), its platform guard's policy and address set (`prismnet.platform-guard`),
and the cluster router's default route via its management address. In the
southbound database ovn-controller registered its Chassis (named by the node's OVS system-id, the
node name here) with its Encaps and Chassis_Private. Releasing a node removes all of that: its
pods' addresses are free again, no tunnel points at it, no policy reroutes to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cni.management import K_CHASSIS, management_names
from cni.ovn import K_NODE, ROUTER
from cni.ovn_egress import pods_set_name
from cni.platform_guard import delete_guard_rows
from ovnaccess.commands import Command, by_name, read, table_rows
from ovnaccess.connection import Ovsdb, connect

log = logging.getLogger(__name__)

NB_TABLES = {
    "Logical_Switch": ["name", "ports"],
    "Logical_Switch_Port": ["name", "addresses", "external_ids"],
    "Logical_Router": ["name", "ports", "policies", "static_routes"],
    "Logical_Router_Port": ["name"],
    "Logical_Router_Policy": ["external_ids"],
    "Logical_Router_Static_Route": ["ip_prefix", "nexthop"],
    "Address_Set": ["name", "external_ids"],
}
SB_TABLES = {"Chassis": ["name", "hostname", "encaps"], "Chassis_Private": ["name"], "Encap": ["ip"]}
MGMT_PREFIX = management_names("")[0]


@dataclass(frozen=True, slots=True)
class Released:
    node: str
    ports: int
    """Logical switch ports removed (pods and the management port)."""
    chassis: int


def nb_nodes(api: Any) -> set[str]:
    """Every node name that owns something in the NB."""
    out = {p.external_ids[K_NODE] for p in table_rows(api, "Logical_Switch_Port") if K_NODE in p.external_ids}
    out |= {s.external_ids[K_NODE] for s in table_rows(api, "Address_Set") if K_NODE in s.external_ids}
    out |= {s.name.removeprefix(MGMT_PREFIX) for s in table_rows(api, "Logical_Switch")
            if s.name.startswith(MGMT_PREFIX)}  # fmt: skip
    return out


def nodes_chassis(api: Any) -> dict[str, str]:
    """node name -> the chassis its agent says the node is now (on its management port)."""
    return {p.external_ids[K_NODE]: p.external_ids[K_CHASSIS] for p in table_rows(api, "Logical_Switch_Port")
            if K_CHASSIS in p.external_ids and K_NODE in p.external_ids}  # fmt: skip


class _ReleaseNb(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str) -> None:
        super().__init__(api)
        self.node = node

    def run_idl(self, txn: Any) -> None:
        node, removed = self.node, 0
        mgmt_switch, mgmt_lsp = management_names(node)
        mgmt = by_name(self.api, "Logical_Switch_Port", mgmt_lsp)
        nexthops = {w for a in (mgmt.addresses if mgmt is not None else []) for w in a.split()[1:]}
        for ls in table_rows(self.api, "Logical_Switch"):
            for port in list(ls.ports):
                if port.external_ids.get(K_NODE) == node or port.name == mgmt_lsp:
                    ls.delvalue("ports", port)  # not a root table: the row goes with its reference
                    removed += 1
        for router in table_rows(self.api, "Logical_Router"):
            if router.name != ROUTER:
                continue
            for policy in router.policies:
                if policy.external_ids.get(K_NODE) == node:
                    router.delvalue("policies", policy)
            for route in router.static_routes:
                if route.nexthop in nexthops:
                    router.delvalue("static_routes", route)
            for lrp in router.ports:
                if lrp.name == f"rtr-{mgmt_switch}":
                    router.delvalue("ports", lrp)
        switch = by_name(self.api, "Logical_Switch", mgmt_switch)
        if switch is not None:
            switch.delete()
        aset = by_name(self.api, "Address_Set", pods_set_name(node))
        if aset is not None:
            aset.delete()
        delete_guard_rows(self.api, node)
        self.result = removed


class _ReleaseSb(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str) -> None:
        super().__init__(api)
        self.node = node

    def run_idl(self, txn: Any) -> None:
        gone = 0
        names = set()
        for chassis in table_rows(self.api, "Chassis"):
            if self.node in (chassis.name, chassis.hostname):
                names.add(chassis.name)
                chassis.delete()  # its Encaps are not root rows: they go with it
                gone += 1
        for private in table_rows(self.api, "Chassis_Private"):
            if private.name in names | {self.node}:
                private.delete()
        self.result = gone


class _RemoveStaleChassis(Command):  # type: ignore[misc]
    def __init__(self, api: Any, current: dict[str, str], reported: set[str]) -> None:
        super().__init__(api)
        self.current, self.reported = current, reported

    def run_idl(self, txn: Any) -> None:
        gone = []
        for chassis in table_rows(self.api, "Chassis"):
            node = next((h for h in (chassis.hostname, chassis.name) if h in self.current), None)
            # never a chassis some node's agent reports as its own (nodes sharing one hostname)
            if node is not None and chassis.name not in self.reported:
                gone.append((node, chassis.name))
                chassis.delete()  # its Encaps with it: the node's new chassis can take their (type, ip)
        names = {name for _, name in gone}
        for private in table_rows(self.api, "Chassis_Private"):
            if private.name in names:
                private.delete()
        self.result = gone


class OvnNodes:
    """The NB and SB connections of the node controller."""

    def __init__(self, nb_remote: str, sb_remote: str, timeout: float = 10.0) -> None:
        self.nb: Ovsdb = connect(nb_remote, "OVN_Northbound", NB_TABLES, timeout=timeout)
        try:
            self.sb: Ovsdb = connect(sb_remote, "OVN_Southbound", SB_TABLES, timeout=timeout)
        except Exception:
            self.nb.stop()
            raise

    def nodes(self) -> set[str]:
        """Every node whose PrismNET agent owns something in the NB. Chassis alone do not count:
        an OVN shared with PlasmaCloud's own hypervisors has chassis that are no Kubernetes node."""
        return set(read(self.nb.api, nb_nodes))

    def release(self, node: str) -> Released:
        ports = _ReleaseNb(self.nb.api, node).execute(check_error=True)
        chassis = _ReleaseSb(self.sb.api, node).execute(check_error=True)
        return Released(node, int(ports or 0), int(chassis or 0))

    def release_absent(self, present: Iterable[str], deleted: Iterable[str] = ()) -> list[Released]:
        """Release every node the NB holds that is not in `present`, and each of `deleted` (a Node
        seen deleted: its chassis too, even if its agent owned nothing) that is not back."""
        out = []
        for node in sorted((self.nodes() | set(deleted)) - set(present)):
            done = self.release(node)
            log.info("released node %s: %d ports, %d chassis", node, done.ports, done.chassis,
                     extra={"node": node, "ports": done.ports, "chassis": done.chassis})  # fmt: skip
            out.append(done)
        return out

    def remove_stale_chassis(self, present: Iterable[str]) -> list[tuple[str, str]]:
        """Remove every chassis named for a node in `present` (by its hostname or its name) that no
        node's agent reports as its chassis now: a reinstalled node's old one, whose Encap would
        keep the new one out of the SB. (node, chassis) removed."""
        reported = read(self.nb.api, nodes_chassis)
        current = {n: c for n, c in reported.items() if n in set(present)}
        if not current:
            return []
        remove = _RemoveStaleChassis(self.sb.api, current, set(reported.values()))
        gone: list[tuple[str, str]] = remove.execute(check_error=True) or []
        for node, name in gone:
            log.warning("removed stale chassis %s of node %s (its chassis is %s now)", name, node,
                        current[node], extra={"node": node, "chassis": name})  # fmt: skip
        return gone

    def close(self) -> None:
        self.nb.stop()
        self.sb.stop()
