"""OVSDB for the agent: its two connections, OVS port binding (`ovn_nb.py`: NB topology).

How the databases are reached (remote lists, leader-only writes, retries, row watching) is
`ovnaccess`; this module says what the agent replicates and writes on the local OVS.

One connection per database per process, built in main(). Each connection's IDL tells a
watcher about every row it sees change, so waiting for ovn-controller
(`Interface.external_ids:ovn-installed`) or ovn-northd (`dynamic_addresses`) is a wait on
a `threading.Event` that the update itself sets: we watch the database, never poll it.

NB topology (spec): one switch `k8s-<namespace>` per namespace with a subnet carved from
the cluster CIDR, one router `k8s-cluster-router` with a port per switch, one LSP per pod.
Every row this suite writes carries `external_ids` `prismnet.*` keys saying who owns it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ovnaccess.commands import Command, by_name, read, table_rows
from ovnaccess.connection import Ovsdb, Tables
from ovnaccess.connection import connect as connect_db
from ovnaccess.watch import Expectation

ROUTER = "k8s-cluster-router"
LB_GROUP = "fiberlb"
"""fiberlb-controller's Load_Balancer_Group (every Service's VIPs): a namespace switch the agent
creates has it from its first row, so a pod's first packet to a ClusterIP is DNATed on its own
switch (through the cluster router alone, a reply processed on another chassis is not un-DNATed)."""
OWNER = "prismnet.owner"
K_CID, K_IFNAME, K_NS, K_POD, K_NODE, K_NET, K_NETNS, K_LSP = (
    "prismnet.container-id",
    "prismnet.ifname",
    "prismnet.namespace",
    "prismnet.pod",
    "prismnet.node",
    "prismnet.network",
    "prismnet.netns",
    "prismnet.lsp",
)
K_SUBNET, K_GEN, K_IPAM = "prismnet.subnet", "prismnet.subnet-generation", "prismnet.ipam"
K_HELD = "k8shost.nb-rebuild.held"
"""On a pod's port written again after the NB was replaced: created disabled (`enabled=false`, all its
traffic dropped) and released by netpol-controller in the transaction that puts it in its policies."""
OVS_COLUMNS: Tables = {
    "Open_vSwitch": ["external_ids", "bridges"],
    "Bridge": ["name", "ports", "datapath_type"],
    "Port": ["name", "interfaces"],
    "Interface": ["name", "type", "external_ids", "bfd_status"],
}
"""Only what we read or write: ovs-vswitchd rewrites every Interface's statistics, status,
link and ofport columns, and each such update would be parsed (in pure Python) by our IDL
(bfd_status changes only when a tunnel's BFD session changes state)."""
NB_TABLES: Tables = {
    **dict.fromkeys(
        (
            "NB_Global",
            "Logical_Switch",
            "Logical_Switch_Port",
            "Logical_Router",
            "Logical_Router_Port",
            "Logical_Router_Static_Route",
            "Logical_Router_Policy",
            "Address_Set",
        )
    ),
    "Load_Balancer_Group": ["name"],
}
"""Load_Balancer_Group by name only (LB_GROUP): its `load_balancer` set holds every Service's row."""


def connect(remote: str, schema: str, timeout: float = 10.0) -> Ovsdb:
    """Connect to OVSDB `remote` (schema Open_vSwitch or OVN_Northbound; a remote list for a cluster)."""
    return connect_db(remote, schema, OVS_COLUMNS if schema == "Open_vSwitch" else NB_TABLES, timeout=timeout)


@dataclass(frozen=True, slots=True)
class OvsPort:
    name: str
    external_ids: dict[str, str]
    installed: bool


class _Unbind(Command):  # type: ignore[misc]
    """ovsdbapp's del_port converts the bridge's whole port list to check membership (O(n) per
    DEL); removing the reference is a mutation that needs no read. The Port and its Interface
    are not root rows: OVSDB deletes them with the last reference."""

    def __init__(self, api: Any, bridge: str, host_if: str) -> None:
        super().__init__(api)
        self.bridge, self.host_if = bridge, host_if

    def run_idl(self, txn: Any) -> None:
        port = by_name(self.api, "Port", self.host_if)
        bridge = by_name(self.api, "Bridge", self.bridge)
        if port is not None and bridge is not None:
            bridge.delvalue("ports", port)


class OvsPorts:
    """Pod ports on the integration bridge of the local ovs-vswitchd."""

    def __init__(self, db: Ovsdb, bridge: str) -> None:
        self._db, self._api, self._bridge = db, db.api, bridge

    def userspace_datapath(self) -> bool:
        """True when the bridge runs the userspace (netdev) datapath."""
        types = self._read(
            lambda api: [r.datapath_type for r in table_rows(api, "Bridge") if r.name == self._bridge]
        )
        return bool(types) and types[0] == "netdev"

    def bridge_exists(self) -> bool:
        return bool(self._read(lambda api: [r for r in table_rows(api, "Bridge") if r.name == self._bridge]))

    def system_id(self) -> str:
        rows = self._read(lambda api: [dict(r.external_ids) for r in table_rows(api, "Open_vSwitch")])
        return rows[0].get("system-id", "") if rows else ""

    @contextmanager
    def expect_installed(self, host_if: str) -> Iterator[Expectation]:
        """Register before `bind`: fires when ovn-controller sets external_ids:ovn-installed=true."""
        with self._db.watcher.expect(
            "Interface", host_if, lambda row: row.external_ids.get("ovn-installed") == "true"
        ) as exp:
            yield exp

    def bind(
        self, host_if: str, lsp: str, external_ids: Mapping[str, str], *, internal: bool = False
    ) -> None:
        ids = {"iface-id": lsp, **external_ids}
        with self._api.transaction(check_error=True) as txn:
            txn.add(self._api.add_port(self._bridge, host_if, may_exist=True))
            cols: list[tuple[str, Any]] = [("external_ids", ids)]
            if internal:
                cols.append(("type", "internal"))
            txn.add(self._api.db_set("Interface", host_if, *cols))

    def unbind(self, host_if: str) -> None:
        """Remove the port from the bridge (nothing if it is gone)."""
        _Unbind(self._api, self._bridge, host_if).execute(check_error=True)
        if self.port(host_if) is not None:  # not on our bridge (moved by hand): the long way
            self._api.del_port(host_if, if_exists=True).execute(check_error=True)

    def port(self, host_if: str) -> OvsPort | None:
        def fn(api: Any) -> OvsPort | None:
            r = by_name(api, "Interface", host_if)
            if r is None:
                return None
            ids = dict(r.external_ids)
            return OvsPort(r.name, ids, ids.get("ovn-installed") == "true")

        return self._read(fn)  # type: ignore[no-any-return]

    def owned_ports(self) -> list[OvsPort]:
        """Interfaces on this bridge that a pod attachment owns."""

        def fn(api: Any) -> list[OvsPort]:
            return [
                OvsPort(r.name, dict(r.external_ids), r.external_ids.get("ovn-installed") == "true")
                for r in table_rows(api, "Interface")
                if K_CID in r.external_ids
            ]

        return self._read(fn)  # type: ignore[no-any-return]

    def tunnels(self) -> dict[str, int]:
        """Geneve tunnel interfaces (ovn-controller makes one per other chassis) by BFD state:
        up, down (any state but up while BFD runs) or off (no BFD session on it)."""

        def fn(api: Any) -> dict[str, int]:
            out = {"up": 0, "down": 0, "off": 0}
            for r in table_rows(api, "Interface"):
                if r.type == "geneve":
                    state = r.bfd_status.get("state")
                    out["off" if state is None else "up" if state == "up" else "down"] += 1
            return out

        return self._read(fn)  # type: ignore[no-any-return]

    def _read(self, fn: Callable[[Any], Any]) -> Any:
        return read(self._api, fn)


@dataclass(frozen=True, slots=True)
class SwitchInfo:
    name: str
    subnet: str
    """CIDR, '' for an L2-only switch (addresses come from another IPAM)."""
    gateway: str
    """The router port's address on it, '' without one."""


@dataclass(frozen=True, slots=True)
class Lsp:
    name: str
    switch: str
    addresses: tuple[str, ...]
    dynamic_addresses: str
    up: bool
    external_ids: dict[str, str] = field(default_factory=dict)


def router_mac(ip: str) -> str:
    return "0a:58:" + ":".join(f"{b:02x}" for b in ipaddress.IPv4Address(ip).packed)
