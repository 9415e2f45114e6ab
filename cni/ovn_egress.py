"""Per-node egress: each node's pods leave the cluster through their own node.

The cluster router is shared by every node, so a single default route would send every
pod's egress through one node (whichever set it last) and lose it when that node goes.
Instead each node gets, on the router:

- an address set `pn_pods_<hash of node>` holding the IPv4 addresses of the pods it runs,
  kept in the same NB transaction that creates or deletes a pod's port (so it cannot drift
  from the ports), and rebuilt from the ports when the agent starts and on CNI GC;
- a policy (priority 1000) `ip4.src == $pn_pods_<..> && ip4.dst != <cluster CIDR>` that
  reroutes to the node's management port, where the node masquerades it.

The default route stays, as the fallback for addresses in no node's set.
"""

from __future__ import annotations

import hashlib
import socket
from typing import Any

from cni.ovn import K_NODE, OWNER, ROUTER
from ovnaccess.commands import Command, by_name, read, table_rows

EGRESS_PRIORITY = 1000
K_ROLE = "prismnet.role"


def pods_set_name(node: str) -> str:
    """An OVN identifier for any node name (node names may hold '-' and '.')."""
    return "pn_pods_" + hashlib.sha1(node.encode()).hexdigest()[:16]


def ipv4_of(entries: list[str]) -> list[str]:
    """The IPv4 addresses in OVN address entries: "MAC IP [IP...]", "router", "dynamic"."""
    return [w for e in entries for w in e.split()[1:] if w.count(".") == 3 and _is_ipv4(w)]


def _is_ipv4(word: str) -> bool:
    try:
        socket.inet_aton(word)
    except OSError:
        return False
    return True


def track(api: Any, set_name: str, ips: list[str], *, add: bool) -> None:
    """Within the caller's transaction: add or remove `ips` in the set (no set: nothing to do)."""
    aset = by_name(api, "Address_Set", set_name) if set_name else None
    if aset is None:
        return
    for ip in ips:
        if add:
            aset.addvalue("addresses", ip)
        else:
            aset.delvalue("addresses", ip)


def _node_pod_ips(api: Any, node: str) -> list[str]:
    return sorted(
        ip
        for p in table_rows(api, "Logical_Switch_Port")
        if p.external_ids.get(K_NODE) == node and K_ROLE not in p.external_ids
        for ip in ipv4_of(list(p.addresses))
    )


class _Resync(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str) -> None:
        super().__init__(api)
        self.node = node

    def run_idl(self, txn: Any) -> None:
        aset = by_name(self.api, "Address_Set", pods_set_name(self.node))
        if aset is None:
            self.result = False
            return
        aset.verify("addresses")  # a pod added meanwhile makes this retry on the fresh replica
        want = _node_pod_ips(self.api, self.node)
        self.result = sorted(aset.addresses) != want
        if self.result:
            aset.addresses = want


class _EnsureEgress(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str, nexthop: str, cluster_cidr: str, owner: str) -> None:
        super().__init__(api)
        self.node, self.nexthop, self.cluster_cidr, self.owner = node, nexthop, cluster_cidr, owner

    def run_idl(self, txn: Any) -> None:
        name = pods_set_name(self.node)
        aset = by_name(self.api, "Address_Set", name)
        if aset is None:
            aset = txn.insert(self.api.tables["Address_Set"])
        else:
            aset.verify("addresses")
        aset.name = name
        aset.external_ids = {OWNER: self.owner, K_NODE: self.node}
        aset.addresses = _node_pod_ips(self.api, self.node)
        router = next((r for r in table_rows(self.api, "Logical_Router") if r.name == ROUTER), None)
        if router is None:
            raise RuntimeError(f"{ROUTER} does not exist; create a namespace switch first")
        policy = next((p for p in router.policies if p.external_ids.get(K_NODE) == self.node), None)
        if policy is None:
            policy = txn.insert(self.api.tables["Logical_Router_Policy"])
            router.addvalue("policies", policy)
        policy.priority = EGRESS_PRIORITY
        policy.match = f"ip4.src == ${name} && ip4.dst != {self.cluster_cidr}"
        policy.action = "reroute"
        policy.nexthops = [self.nexthop]
        policy.external_ids = {OWNER: self.owner, K_NODE: self.node}
        self.result = len(aset.addresses)


class _DeleteEgress(Command):  # type: ignore[misc]
    def __init__(self, api: Any, node: str) -> None:
        super().__init__(api)
        self.node = node

    def run_idl(self, txn: Any) -> None:
        for router in table_rows(self.api, "Logical_Router"):
            for policy in router.policies:
                if policy.external_ids.get(K_NODE) == self.node:
                    router.delvalue("policies", policy)  # not a root table: deleted with the reference
        aset = by_name(self.api, "Address_Set", pods_set_name(self.node))
        if aset is not None:
            aset.delete()


class NodeEgress:
    """The node's egress policy and pod address set on the cluster router."""

    def __init__(self, api: Any, owner: str) -> None:
        self._api, self._owner = api, owner

    def ensure(self, node: str, nexthop: str, cluster_cidr: str) -> int:
        """Create or update both, rebuilding the set from the node's ports; returns its size."""
        cmd = _EnsureEgress(self._api, node, nexthop, cluster_cidr, self._owner)
        return cmd.execute(check_error=True)  # type: ignore[no-any-return]

    def resync(self, node: str) -> bool:
        """Rebuild the node's set from its ports (CNI GC); True if it had drifted."""
        return bool(_Resync(self._api, node).execute(check_error=True))

    def delete(self, node: str) -> None:
        _DeleteEgress(self._api, node).execute(check_error=True)

    def members(self, node: str) -> list[str] | None:
        """The addresses in the node's set (None: no set)."""

        def fn(api: Any) -> list[str] | None:
            aset = by_name(api, "Address_Set", pods_set_name(node))
            return None if aset is None else sorted(aset.addresses)

        return read(self._api, fn)  # type: ignore[no-any-return]


class TrackPort(Command):  # type: ignore[misc]
    """In a transaction with the port's creation or deletion: its IPv4 addresses into or out of
    the node's set. Removal reads them from the port row, so it must come before the delete."""

    def __init__(self, api: Any, set_name: str, lsp: str, *, add: bool, ips: list[str] | None = None) -> None:
        super().__init__(api)
        self.set_name, self.lsp, self.add, self.ips = set_name, lsp, add, ips

    def run_idl(self, txn: Any) -> None:
        ips = self.ips
        if ips is None:
            row = by_name(self.api, "Logical_Switch_Port", self.lsp)
            ips = ipv4_of(list(row.addresses)) if row is not None else []
        track(self.api, self.set_name, ips, add=self.add)
