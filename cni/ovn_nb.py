"""The OVN northbound side: namespace switches, the cluster router, pod logical switch ports.

Subnet carving is cluster-wide consistent without a lock service: the transaction that
creates a namespace switch verifies `NB_Global.external_ids` and bumps a generation
counter in it, so two agents (or two threads) carving at once conflict in OVSDB; ovsdbapp
retries the loser, which then sees the winner's switch and subnet.

Address allocation (default IPAM) is a transaction of our own on the NB database: it
verifies the switch's `ports` column, picks the lowest free address of the switch's subnet
(skipping every port's static and dynamic addresses and `exclude_ips`), and inserts the
pod's port with that MAC + IP as `addresses` and `port_security`, in one commit. A
concurrent writer to the same switch (another agent, on any node) makes the commit fail
verification; ovsdbapp retries it on the fresh replica, so an address is never handed out
twice. The port row *is* the reservation: the address is released exactly when the port
is deleted and cannot leak past it. (OVN's own dynamic addressing, `addresses=dynamic`,
works too but needs a round trip through ovn-northd and a second commit to pin the
address into port_security, during which the port exists without port security.)
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from cni.address_index import AddressIndex
from cni.ipam_usage import SubnetUsage, reserved_addresses, subnet_usage
from cni.ovn import (
    K_GEN,
    K_HELD,
    K_NODE,
    K_NS,
    K_SUBNET,
    LB_GROUP,
    OWNER,
    ROUTER,
    Lsp,
    SwitchInfo,
    router_mac,
)
from cni.ovn_egress import NodeEgress, TrackPort, ipv4_of, track
from cni.platform_guard import PlatformGuard
from ovnaccess.commands import Command, by_name, read, table_rows
from ovnaccess.connection import Ovsdb

log = logging.getLogger(__name__)


class SubnetsExhausted(RuntimeError):
    pass


class SubnetOverlap(RuntimeError):
    """A switch was to be created with a subnet overlapping another switch's: refused, nothing written."""

    def __init__(self, switch: str, subnet: str, other: str, other_subnet: str) -> None:
        super().__init__(f"switch {switch}: subnet {subnet} overlaps {other_subnet} of switch {other}; "
                         "not created (two switches would hand out the same addresses)")  # fmt: skip
        self.switch, self.subnet, self.other, self.other_subnet = switch, subnet, other, other_subnet


class SwitchMissing(LookupError):
    """allocate_port's switch does not exist yet (create it with ensure_switch, then retry)."""


class NotOurSwitch(RuntimeError):
    """The switch exists without a PrismNET subnet and gateway: its addresses are not ours to give."""


class Allocated(NamedTuple):
    mac: str
    ip: str
    prefixlen: int
    gateway: str
    """The switch's router port address ('' on a switch without one)."""


BeforeCommit = Callable[[str], None]
"""Called with "ensure_switch" or "allocate_port" after a verified read, before its commit
(on the connection thread, once per attempt). A seam for tests that force two agents to
interleave; production passes none."""


def _no_hook(op: str) -> None:
    return None


def _switch_info(row: Any) -> SwitchInfo:
    ids = dict(row.external_ids)
    return SwitchInfo(row.name, ids.get(K_SUBNET, ""), ids.get("prismnet.gateway", ""))


class _EnsureSwitch(Command):  # type: ignore[misc]
    """Create switch + router port on first use; carve its subnet if `subnet` is None."""

    def __init__(
        self,
        api: Any,
        switch: str,
        cluster: ipaddress.IPv4Network,
        prefix: int,
        subnet: ipaddress.IPv4Network | None,
        gateway: str,
        owner: str,
        before_commit: BeforeCommit = _no_hook,
        as_carved: bool = False,
    ) -> None:
        super().__init__(api)
        self.switch, self.cluster, self.prefix = switch, cluster, prefix
        self.subnet, self.gateway, self.owner = subnet, gateway, owner
        self.before_commit, self.as_carved = before_commit, as_carved

    def run_idl(self, txn: Any) -> None:
        switches = table_rows(self.api, "Logical_Switch")
        for row in switches:
            if row.name == self.switch:
                self.result = _switch_info(row)
                return
        nbg = table_rows(self.api, "NB_Global")
        glob = nbg[0] if nbg else txn.insert(self.api.tables["NB_Global"])
        glob.verify("external_ids")
        carve = self.subnet is None
        subnet = self._carve(switches) if carve else self.subnet
        assert subnet is not None
        if not carve:
            _refuse_overlap(self.switch, subnet, switches, managed=self.as_carved)
        gateway = self.gateway or (str(next(subnet.hosts())) if carve else "")
        ls = txn.insert(self.api.tables["Logical_Switch"])
        ls.name = self.switch
        ls.external_ids = {OWNER: self.owner, K_SUBNET: str(subnet), "prismnet.gateway": gateway}
        if carve or self.as_carved:
            ls.other_config = {"subnet": str(subnet), "exclude_ips": gateway}
        group = by_name(self.api, "Load_Balancer_Group", LB_GROUP)
        if group is not None:  # none before the first Service: fiberlb attaches it to every switch then
            ls.load_balancer_group = [group]
        if gateway:
            self._router_port(txn, ls, f"{gateway}/{subnet.prefixlen}", gateway)
        gen = int(dict(glob.external_ids).get(K_GEN, "0")) + 1
        glob.setkey("external_ids", K_GEN, str(gen))
        self.result = SwitchInfo(self.switch, str(subnet), gateway)
        self.before_commit("ensure_switch")

    def _carve(self, switches: list[Any]) -> ipaddress.IPv4Network:
        used = [net for row in switches for _, net in _subnets_of(row, managed=True)]
        for cand in self.cluster.subnets(new_prefix=self.prefix):
            if not any(cand.overlaps(u) for u in used):
                return cand
        raise SubnetsExhausted(f"no free /{self.prefix} left in {self.cluster}")

    def _router_port(self, txn: Any, ls: Any, network: str, gateway: str) -> None:
        routers = [r for r in table_rows(self.api, "Logical_Router") if r.name == ROUTER]
        if routers:
            router = routers[0]
        else:
            router = txn.insert(self.api.tables["Logical_Router"])
            router.name, router.external_ids = ROUTER, {OWNER: self.owner}
        # a switch deleted alone (`ovn-nbctl ls-del`) leaves its router port: taken again (names are unique)
        lrp = by_name(self.api, "Logical_Router_Port", f"rtr-{self.switch}")
        lrp = lrp if lrp is not None else txn.insert(self.api.tables["Logical_Router_Port"])
        lrp.name, lrp.mac, lrp.networks = f"rtr-{self.switch}", router_mac(gateway), [network]
        lrp.external_ids = {OWNER: self.owner}
        router.addvalue("ports", lrp)
        rport = txn.insert(self.api.tables["Logical_Switch_Port"])
        rport.name, rport.type, rport.addresses = f"{self.switch}-rtr", "router", ["router"]
        rport.options = {"router-port": lrp.name}
        rport.external_ids = {OWNER: self.owner}
        ls.addvalue("ports", rport)


def _subnets_of(row: Any, *, managed: bool) -> list[tuple[str, ipaddress.IPv4Network]]:
    """A switch's subnets: OVN IPAM's (`other_config:subnet`) and, if `managed`, PrismNET's record too
    (external_ids; a delegated or PrismNET-IPAM switch has only that one), as (text, network)."""
    values = [row.other_config.get("subnet"), row.external_ids.get(K_SUBNET) if managed else None]
    return [(v, ipaddress.IPv4Network(v, strict=False)) for v in dict.fromkeys(values) if v]


def _refuse_overlap(
    switch: str, subnet: ipaddress.IPv4Network, switches: list[Any], *, managed: bool
) -> None:
    """SubnetOverlap if `subnet` overlaps another switch's OVN IPAM subnet, or, for a switch whose
    addresses OVN IPAM gives (`managed`), any subnet another switch records. Switches of delegated
    IPAM may share a range among themselves: their addresses are that IPAM's, not ours."""
    for row in switches:
        for text, net in _subnets_of(row, managed=managed):
            if row.name != switch and subnet.overlaps(net):
                raise SubnetOverlap(switch, str(subnet), row.name, text)


class _AllocatePort(Command):  # type: ignore[misc]
    """Insert a port with the lowest free address of its switch's subnet (see module doc)."""

    def __init__(
        self,
        api: Any,
        switch: str,
        lsp: str,
        external_ids: dict[str, str],
        mac_only: bool,
        held: PortAddresses,
        address_set: str,
        before_commit: BeforeCommit = _no_hook,
    ) -> None:
        super().__init__(api)
        self.switch, self.lsp, self.external_ids, self.mac_only = switch, lsp, external_ids, mac_only
        self.held, self.address_set, self.before_commit = held, address_set, before_commit

    def run_idl(self, txn: Any) -> None:
        ls = next((r for r in table_rows(self.api, "Logical_Switch") if r.name == self.switch), None)
        if ls is None:
            raise SwitchMissing(f"switch {self.switch} does not exist")
        info = _switch_info(ls)
        if not info.subnet or not info.gateway:
            raise NotOurSwitch(f"switch {self.switch} exists without a PrismNET subnet; cannot allocate")
        subnet = ipaddress.IPv4Network(info.subnet)
        ls.verify("ports")
        ip = _lowest_free(subnet, _used_addresses(self.api, ls, subnet, self.held))
        if ip is None:
            raise SubnetsExhausted(f"no free address left in {subnet} on {self.switch}")
        mac = router_mac(str(ip))  # 0a:58:<ip>: unique with the address
        port = txn.insert(self.api.tables["Logical_Switch_Port"])
        port.name, port.addresses = self.lsp, [f"{mac} {ip}"]
        port.port_security = [mac if self.mac_only else f"{mac} {ip}"]
        port.external_ids = self.external_ids
        ls.addvalue("ports", port)
        track(self.api, self.address_set, [str(ip)], add=True)
        self.result = Allocated(mac, str(ip), subnet.prefixlen, info.gateway)
        self.before_commit("allocate_port")


class PortAddresses:
    """The IPv4 addresses each logical switch port holds, parsed once per version of its row.

    Allocation reads every port's addresses, and python-ovs converts a row's columns on each
    attribute access (~14 us per port here: 1.8 ms per allocation at 125 pods). The parsed
    addresses are kept per row UUID and forgotten when the IDL reports the row updated or
    deleted. Both happen on the IDL's connection thread, where allocation also runs, so a
    lookup never sees a row newer than its cached addresses.

    `held_in` answers from an AddressIndex of every port's addresses, brought up to date with
    the rows the IDL reported changed since the last call (and from the table itself when the
    index's row count is not the table's).
    """

    def __init__(self) -> None:
        self._held: dict[Any, frozenset[int]] = {}
        self._index = AddressIndex()
        self._dirty: set[Any] = set()

    def on_change(self, event: str, row: Any) -> None:
        if event != "create":
            self._held.pop(row.uuid, None)
        if event == "delete":
            self._index.drop(row.uuid)
            self._dirty.discard(row.uuid)
        else:
            self._dirty.add(row.uuid)

    def held_in(self, rows: Mapping[Any, Any], first: int, last: int) -> list[int]:
        """Addresses from `first` to `last` held by any of `rows` (the port table's rows by UUID)."""
        for uuid in self._dirty:
            row = rows.get(uuid)
            if row is not None:
                self._index.put(uuid, self.of(row))
        self._dirty.clear()
        # Every row the IDL adds is reported (its refill after a reconnect too), so the index
        # holds every row plus those deleted unreported (a refill's); the counts differ exactly
        # when it is off, e.g. before the first call (rows loaded before the hook was set).
        if len(self._index.holders) != len(rows):
            for uuid in self._index.holders.keys() - rows.keys():
                self._index.drop(uuid)
            for uuid, row in rows.items():
                if uuid not in self._index.holders:
                    self._index.put(uuid, self.of(row))
        return self._index.within(first, last)

    def of(self, port: Any) -> frozenset[int]:
        held = self._held.get(port.uuid)
        if held is None:
            held = self._held[port.uuid] = frozenset(_ipv4_ints([*port.addresses, *port.dynamic_addresses]))
        return held


def _ipv4_ints(entries: list[str]) -> set[int]:
    """IPv4 addresses in OVN address entries, as integers."""
    return {int.from_bytes(socket.inet_aton(w), "big") for w in ipv4_of(entries)}


def _used_addresses(api: Any, ls: Any, subnet: ipaddress.IPv4Network, held: PortAddresses) -> set[int]:
    """Addresses of `subnet` that are taken: excluded, the gateway, or held by any port.

    Any port, not only the switch's: reading `ls.ports` makes python-ovs build and sort a
    list of every member row (O(n log n) comparisons in Python), while the table's rows are
    a plain dict. Subnets are carved disjoint, so a port elsewhere holding an address of this
    subnet is a misconfiguration, and counting that address as taken is the safe answer.
    `ls.verify("ports")` still guards the switch against concurrent allocations. The ports'
    addresses come from `held`'s index: no scan of every port per allocation."""
    used = reserved_addresses(ls)
    first, last = int(subnet.network_address), int(subnet.broadcast_address)
    used.update(held.held_in(api.tables["Logical_Switch_Port"].rows, first, last))
    return used


def _lowest_free(subnet: ipaddress.IPv4Network, used: set[int]) -> ipaddress.IPv4Address | None:
    """The lowest address of `subnet.hosts()` not in `used`."""
    first, last = int(subnet.network_address), int(subnet.broadcast_address)
    if subnet.prefixlen < 31:
        first, last = first + 1, last - 1
    return next((ipaddress.IPv4Address(i) for i in range(first, last + 1) if i not in used), None)


class _DeletePort(Command):  # type: ignore[misc]
    """Remove a port from its switch: for a pod's port, the switch named by its namespace.

    ovsdbapp's lsp_del finds the switch by converting member lists (O(n) per DEL); a pod port
    records its namespace, and removing the reference is a mutation that needs no read. A
    port is not a root row: OVSDB deletes it with its last reference. Ports without a
    namespace (the management port) are looked up the long way."""

    def __init__(self, api: Any, lsp: str) -> None:
        super().__init__(api)
        self.lsp = lsp

    def run_idl(self, txn: Any) -> None:
        row = by_name(self.api, "Logical_Switch_Port", self.lsp)
        if row is None:
            return
        ns = row.external_ids.get(K_NS)
        switches = table_rows(self.api, "Logical_Switch")
        home = next((ls for ls in switches if ns and ls.name == f"k8s-{ns}"), None)
        for ls in [home] if home is not None else [ls for ls in switches if row in ls.ports]:
            ls.delvalue("ports", row)


class _VerifyRoutes(Command):  # type: ignore[misc]
    """The cluster router's `static_routes` verified: a concurrent change makes the commit retry."""

    def run_idl(self, txn: Any) -> None:
        for router in table_rows(self.api, "Logical_Router"):
            if router.name == ROUTER:
                router.verify("static_routes")


def _lsp(row: Any, switch: str = "") -> Lsp:
    return Lsp(
        name=row.name,
        switch=switch,
        addresses=tuple(row.addresses),
        dynamic_addresses=(row.dynamic_addresses[0] if row.dynamic_addresses else ""),
        up=bool(row.up and row.up[0]),
        external_ids=dict(row.external_ids),
    )


class Northbound:
    """Typed operations on the OVN northbound database."""

    def __init__(
        self,
        db: Ovsdb,
        owner: str,
        *,
        before_commit: BeforeCommit = _no_hook,
        on_overlap: Callable[[SubnetOverlap], None] | None = None,
    ) -> None:
        self._db, self._api, self._owner = db, db.api, owner
        self._before_commit, self._on_overlap = before_commit, on_overlap
        self._held = PortAddresses()
        db.on_row_change("Logical_Switch_Port", self._held.on_change)

    def egress(self) -> NodeEgress:
        """Per-node egress policies and pod address sets (cni/ovn_egress.py)."""
        return NodeEgress(self._api, self._owner)

    def guard(self) -> PlatformGuard:
        """Per-node platform guard policies and address sets (cni/platform_guard.py)."""
        return PlatformGuard(self._api, self._owner)

    def ensure_switch(
        self,
        switch: str,
        cluster: ipaddress.IPv4Network,
        prefix: int,
        subnet: ipaddress.IPv4Network | None = None,
        gateway: str = "",
        *,
        as_carved: bool = False,
    ) -> SwitchInfo:
        """The switch (created with `subnet` and `gateway`, or a subnet carved when None; `as_carved`:
        a given subnet recorded as a carved one is, for a switch written again after the NB was lost)."""
        cmd = _EnsureSwitch(
            self._api, switch, cluster, prefix, subnet, gateway, self._owner, self._before_commit, as_carved
        )
        # our exceptions are answers (no subnet left), raised to the caller: not ovsdbapp's to log
        try:
            return cmd.execute(check_error=True, log_errors=False)  # type: ignore[no-any-return]
        except SubnetOverlap as e:
            log.error("refused: %s", e, extra={"switch": e.switch, "subnet": e.subnet, "other": e.other})
            if self._on_overlap is not None:
                self._on_overlap(e)
            raise

    def allocate_port(
        self,
        switch: str,
        lsp: str,
        external_ids: Mapping[str, str],
        *,
        mac_only_security: bool = False,
        address_set: str = "",
    ) -> Allocated:
        """Create `lsp` on `switch` with a free address of its subnet (SwitchMissing if there is no
        such switch: allocation needs no other round trip in the usual case).

        The address also goes into `address_set` (the node's egress set), if that exists."""
        ids = {OWNER: self._owner, **external_ids}
        cmd = _AllocatePort(
            self._api, switch, lsp, ids, mac_only_security, self._held, address_set, self._before_commit
        )
        return cmd.execute(check_error=True, log_errors=False)  # type: ignore[no-any-return]

    def add_port(
        self,
        switch: str,
        lsp: str,
        addresses: list[str],
        port_security: list[str],
        external_ids: Mapping[str, str],
        *,
        address_set: str = "",
        held: bool = False,
    ) -> None:
        """Create (or overwrite) a pod's port on `switch` (its IPv4 addresses into `address_set`);
        `held`: disabled until netpol-controller releases it (K_HELD)."""
        ids = {OWNER: self._owner, **external_ids, **({K_HELD: "true"} if held else {})}
        hold = [("enabled", [False])] if held else []
        with self._api.transaction(check_error=True) as txn:
            txn.add(TrackPort(self._api, address_set, lsp, add=False))  # an overwritten port's old ones
            txn.add(self._api.lsp_add(switch, lsp, may_exist=True))
            txn.add(
                self._api.db_set(
                    "Logical_Switch_Port",
                    lsp,
                    ("addresses", addresses),
                    ("port_security", port_security),
                    ("external_ids", ids),
                    *hold,
                )
            )
            txn.add(TrackPort(self._api, address_set, lsp, add=True, ips=ipv4_of(addresses)))

    def delete_port(self, lsp: str, *, address_set: str = "") -> None:
        """Delete the port (nothing if it is gone) and its IPv4 addresses from `address_set`."""
        with self._api.transaction(check_error=True) as txn:
            txn.add(TrackPort(self._api, address_set, lsp, add=False))
            txn.add(_DeletePort(self._api, lsp))
        if self.port(lsp) is not None:  # not on its namespace's switch (moved by hand): the long way
            self._api.lsp_del(lsp, if_exists=True).execute(check_error=True)

    def set_port_ids(self, lsp: str, ids: dict[str, str]) -> None:
        """Set these external_ids keys of an existing port (the others stay)."""
        self._api.db_set("Logical_Switch_Port", lsp, ("external_ids", ids)).execute(check_error=True)

    def port(self, lsp: str) -> Lsp | None:
        """The port named `lsp` (its switch as recorded in its external_ids, if ours)."""

        def fn(api: Any) -> Lsp | None:
            p = by_name(api, "Logical_Switch_Port", lsp)
            if p is None:
                return None
            ns = p.external_ids.get(K_NS)
            return _lsp(p, f"k8s-{ns}" if ns else "")

        return read(self._api, fn)  # type: ignore[no-any-return]

    def owned_ports(self, node: str) -> list[Lsp]:
        """Pod ports created by the agent of `node`."""

        def fn(api: Any) -> list[Lsp]:
            return [
                _lsp(p, ls.name)
                for ls in table_rows(api, "Logical_Switch")
                for p in ls.ports
                if p.external_ids.get(K_NODE) == node
            ]

        return read(self._api, fn)  # type: ignore[no-any-return]

    def address_usage(self) -> list[SubnetUsage]:
        """Used and free addresses of every PrismNET subnet (cluster-wide; for /metrics)."""
        return read(self._api, lambda api: subnet_usage(api, self._held.of))  # type: ignore[no-any-return]

    def ensure_default_route(self, nexthop: str) -> None:
        """Egress: the cluster router sends what it has no route for to a node (masqueraded there).
        One route, whichever node set it last: the router's routes verified, so two agents setting it
        at once (all of them after the NB was rebuilt) do not both insert one."""
        with self._api.transaction(check_error=True) as txn:
            txn.add(_VerifyRoutes(self._api))
            txn.add(self._api.lr_route_add(ROUTER, "0.0.0.0/0", nexthop, may_exist=True))

    def delete_default_route(self, nexthop: str) -> None:
        def fn(api: Any) -> bool:
            return any(r.name == ROUTER for r in table_rows(api, "Logical_Router"))

        if read(self._api, fn):
            self._api.lr_route_del(ROUTER, "0.0.0.0/0", nexthop, if_exists=True).execute(check_error=True)
