"""The platform guard: pods never open a connection to the platform's listeners.

Each node's agent keeps, on the cluster router, for its own node:

- an address set `pn_host_<hash of node>`: every IPv4 address of the node's network namespace
  (loopback aside; read when the agent starts), its management port address, the hosts of the
  OVN remotes it was given (OVN central) and `--platform-addresses`;
- a policy (priority 2000, above the egress reroutes at 1000) that drops traffic to that set on
  the platform's ports (`--platform-ports`, e.g. the OVSDB ports 6640-6644).

Why a router policy: every packet from a pod to an address outside its own namespace switch
crosses the cluster router, after the switch's ACLs (so no NetworkPolicy a tenant writes, at any
priority, can allow it) and after the switches' and the router's load balancers (so a Service
whose endpoints name a node's address is judged by that address). It matches the destination
port only, statelessly: a node's own connections into pods (kubelet probes) are answered to the
node's ephemeral ports (32768-60999 by default), which no platform port is in.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections.abc import Callable, Iterable
from typing import Any

from cni.links import Links
from cni.ovn import OWNER, ROUTER
from cni.platform_ports import PortRange, parse_ports
from cni.settings import AgentSettings
from ovnaccess.commands import Command, by_name, read, table_rows
from ovnaccess.remotes import parse_remotes

GUARD_PRIORITY = 2000
log = logging.getLogger(__name__)
GUARD_REFRESH = 15.0
K_GUARD = "prismnet.platform-guard"
"""external_ids key on the set and the policy: the node they guard."""


def remote_hosts(remotes: str) -> list[str]:
    """The IPv4 hosts of an OVSDB remote list (`tcp:10.0.0.1:6641,unix:/x` -> ['10.0.0.1'])."""
    out = []
    for remote in parse_remotes(remotes):
        scheme, _, rest = remote.partition(":")
        host = rest.rpartition(":")[0] if scheme != "unix" else ""
        if host and _is_ipv4(host):
            out.append(host)
    return out


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


GUARD_TABLES = ("Logical_Router_Policy", "Address_Set")


def guard_row_hook(node: str, wake: Callable[[], object]) -> Callable[[str, Any], None]:
    """An NB row hook (on the IDL thread) calling `wake` when `node`'s guard policy or address set
    is created, changed or deleted: someone else's change is undone at once, not at the refresh
    (our own writes wake it too; the ensure after them finds nothing to commit)."""

    def hook(event: str, row: Any) -> None:
        if row.external_ids.get(K_GUARD) == node:
            wake()

    return hook


def host_set_name(node: str) -> str:
    return "pn_host_" + hashlib.sha1(node.encode()).hexdigest()[:16]


def guard_match(set_name: str, ports: Iterable[PortRange]) -> str:
    return f"ip4.dst == ${set_name} && ({' || '.join(p.match() for p in ports)})"


class _EnsureGuard(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str, addresses: list[str], match: str, owner: str) -> None:
        super().__init__(api)
        self.node, self.addresses, self.match, self.owner = node, addresses, match, owner

    def run_idl(self, txn: Any) -> None:
        router = by_name(self.api, "Logical_Router", ROUTER)
        if router is None:
            raise RuntimeError(f"{ROUTER} does not exist; the management port creates it")
        name, ids = host_set_name(self.node), {OWNER: self.owner, K_GUARD: self.node}
        aset = by_name(self.api, "Address_Set", name)
        policy = next((p for p in router.policies if p.external_ids.get(K_GUARD) == self.node), None)
        self.result = aset is None or policy is None or sorted(aset.addresses) != self.addresses
        if policy is not None and (policy.priority, policy.match, policy.action) != self._policy():
            self.result = True
        if not self.result:
            return  # the periodic refresh: nothing to commit
        aset = aset or txn.insert(self.api.tables["Address_Set"])
        aset.name, aset.external_ids, aset.addresses = name, ids, self.addresses
        if policy is None:
            policy = txn.insert(self.api.tables["Logical_Router_Policy"])
            router.addvalue("policies", policy)
        policy.priority, policy.match, policy.action = self._policy()
        policy.external_ids = ids

    def _policy(self) -> tuple[int, str, str]:
        return GUARD_PRIORITY, self.match, "drop"


class _DeleteGuard(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str) -> None:
        super().__init__(api)
        self.node = node

    def run_idl(self, txn: Any) -> None:
        delete_guard_rows(self.api, self.node)


def delete_guard_rows(api: Any, node: str) -> None:
    """Within the caller's transaction: the node's guard policy and address set (node-controller's
    release of a deleted Node uses it too)."""
    for router in table_rows(api, "Logical_Router"):
        for policy in router.policies:
            if policy.external_ids.get(K_GUARD) == node:
                router.delvalue("policies", policy)  # not a root table: deleted with the reference
    aset = by_name(api, "Address_Set", host_set_name(node))
    if aset is not None:
        aset.delete()


class PlatformGuard:
    """The node's guard policy and address set on the cluster router."""

    def __init__(self, api: Any, owner: str) -> None:
        self._api, self._owner = api, owner

    def ensure(self, node: str, addresses: Iterable[str], ports: Iterable[PortRange]) -> bool:
        """Create or update both (idempotent); True if anything was written."""
        want = sorted(set(addresses))
        match = guard_match(host_set_name(node), ports)
        return bool(_EnsureGuard(self._api, node, want, match, self._owner).execute(check_error=True))

    def delete(self, node: str) -> None:
        _DeleteGuard(self._api, node).execute(check_error=True)

    def policy(self, node: str) -> tuple[str, list[str]] | None:
        """(match, addresses) of the node's guard, None without one."""

        def fn(api: Any) -> tuple[str, list[str]] | None:
            router = by_name(api, "Logical_Router", ROUTER)
            policies = [p for p in (router.policies if router else []) if p.external_ids.get(K_GUARD) == node]
            aset = by_name(api, "Address_Set", host_set_name(node))
            if not policies or aset is None:
                return None
            return str(policies[0].match), sorted(aset.addresses)

        return read(self._api, fn)  # type: ignore[no-any-return]


def ensure_platform_guard(
    s: AgentSettings, guard: PlatformGuard, links: Links, node: str, management_address: str
) -> list[str]:
    """The node's guard as the settings say (deleted when `platform_ports` is empty), at the agent's
    start before it serves, again as soon as the node gains or loses an address (cni/address_watch.py)
    and every GUARD_REFRESH seconds; returns the guarded addresses."""
    ports = parse_ports(s.platform_ports)
    if not ports:
        guard.delete(node)
        log.warning("platform guard off (--platform-ports is empty): pods reach every port of node %s", node)
        return []
    listed = f"{s.platform_addresses},{s.dns_servers}"  # the pods' nameservers: the node-local DNS
    addresses = [*links.ipv4_addresses(), management_address.split("/")[0], *remote_hosts(s.ovn_nb_db)]
    addresses += [a.strip() for a in listed.split(",") if _is_ipv4(a.strip())]
    guarded = sorted(set(addresses), key=ipaddress.IPv4Address)
    if guard.ensure(node, guarded, ports):
        log.info("platform guard of node %s: %s on %s", node, s.platform_ports, ", ".join(guarded))
    return guarded
