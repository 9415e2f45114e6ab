"""The desired policy state onto the OVN northbound database (ovsdbapp; the only importer in netpol/).

Every row this controller writes carries `external_ids` `k8shost.netpol.owner=netpol-controller`
and `k8shost.netpol.key=<owner key>`; it finds its rows again by them (after a restart too) and
never changes or deletes a row without them. `apply` diffs desired against the IDL's replica and
writes every difference in ONE transaction: port-group membership and address-set contents by
mutation (add/remove single values), ACLs by inserting the new and dropping the old reference
(ACL rows are not root: OVSDB collects them). So an update is seen by ovn-northd all at once and
there is no moment where a pod is isolated without its allows, or open without its drops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from cni.ovn import K_HELD, K_NS, K_POD
from cni.ovn_egress import K_ROLE, ipv4_of
from controllers.netpol.acl_logging import METER, AclLog
from controllers.netpol.translate import CLUSTER_OWNER, Acl, AddressSet, Desired, Frozen, PortGroup
from ovnaccess.commands import Command, by_name, read
from ovnaccess.connection import OvsdbIdl, connect

log = logging.getLogger(__name__)

K_OWNER, K_KEY, K_TYPES = "k8shost.netpol.owner", "k8shost.netpol.key", "k8shost.netpol.types"
K_REF = "k8shost.netpol.ref"
OWNER = "netpol-controller"
TABLES = {
    "Port_Group": ["name", "ports", "acls", "external_ids"],
    "ACL": [
        "direction",
        "priority",
        "match",
        "action",
        "options",
        "external_ids",
        "name",
        "log",
        "severity",
        "meter",
    ],
    "Meter": ["name", "unit", "bands", "fair", "external_ids"],
    "Meter_Band": ["action", "rate", "burst_size", "external_ids"],
    "Address_Set": ["name", "addresses", "external_ids"],
    "Logical_Switch_Port": ["name", "addresses", "external_ids", "enabled"],
}


class NameTaken(RuntimeError):
    """A row we would create exists and is not ours: we do not take it over."""


@dataclass(frozen=True, slots=True)
class PortInfo:
    lsp: str
    namespace: str
    pod: str
    ips: tuple[str, ...]
    management: bool
    held: bool = False


@dataclass(frozen=True, slots=True)
class ApplyStats:
    created: int
    changed: int
    deleted: int

    @property
    def total(self) -> int:
        return self.created + self.changed + self.deleted


INDEXED = ("Port_Group", "Address_Set")
"""Tables whose rows of ours are indexed by uuid (name kept): an apply finds them without a scan."""


class _Idl(OvsdbIdl):
    """Keeps a parsed view of every logical switch port, updated as the rows change (a reconcile
    reads it instead of converting 500 IDL rows each time; `ports_version` counts its changes), our
    port groups and address sets by uuid, and what changed since the last apply (`Touched`): port
    groups and address sets by name, ACLs by their owner key (an apply compares a port group again
    when it or one of its owner's ACLs changed, without reading every group's ACLs to find out)."""

    on_change: Callable[[], None] | None = None
    touched: Touched
    port_view: dict[Any, PortInfo]
    ports_version: int
    owned: dict[str, dict[Any, str]]
    applied: Desired
    """What the last successful apply wrote (read on this thread: the NB replaced resets it first)."""
    epoch: int
    """Times `applied` was reset (the NB replaced): an apply begun before keeps it reset."""

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        table = row._table.name
        if table not in TABLES:  # NB_Global's name only, which `connect` adds (a standalone NB's identity)
            return
        if table != "Logical_Switch_Port":
            ours = row.external_ids.get(K_OWNER) == OWNER
            with self.ports_lock:
                if table in self.owned:
                    self.touched.names.add((table, row.name))
                    _index(self.owned[table], row, ours and event != "delete")
                elif table == "ACL":
                    self.touched.keys |= _acl_keys(row, updates)
            if not ours:
                return
        else:
            with self.ports_lock:
                self.ports_version += 1
                if event == "delete":
                    self.port_view.pop(row.uuid, None)
                else:
                    self.port_view[row.uuid] = _port_info(row)
        if self.on_change is not None:
            self.on_change()

    def take_touched(self) -> Touched:
        """What changed of Port_Group, Address_Set and ACL rows since the last call."""
        with self.ports_lock:
            taken, self.touched = self.touched, Touched()
        return taken

    def give_back(self, taken: Touched) -> None:
        """An apply that wrote nothing: what it took is compared again next time."""
        with self.ports_lock:
            self.touched |= taken

    def __init__(self, remote: str, helper: Any) -> None:
        self.ports_lock = threading.Lock()
        self.port_view: dict[Any, PortInfo] = {}
        self.touched = Touched()
        self.ports_version = 0
        self.owned = {t: {} for t in INDEXED}
        self.applied, self.epoch = Desired(), 0
        super().__init__(remote, helper)

    def forget_applied(self) -> None:
        """The NB replaced: nothing we wrote is there; the next apply compares every row."""
        with self.ports_lock:
            self.applied, self.epoch = Desired(), self.epoch + 1

    def applied_by(self, desired: Desired, epoch: int) -> None:
        """`desired` was written by an apply that read `applied` at `epoch`; unless the NB was
        replaced since, it is what the next apply compares with."""
        with self.ports_lock:
            if self.epoch == epoch:
                self.applied = desired


@dataclass
class Touched:
    """Rows changed since an apply: the owner keys of the changed ACLs, and (table, name) of the
    changed port groups and address sets (a deleted row's name still says which it was)."""

    keys: set[str] = field(default_factory=set)
    names: set[tuple[str, str]] = field(default_factory=set)

    def __ior__(self, other: Touched) -> Touched:
        self.keys |= other.keys
        self.names |= other.names
        return self


def _index(owned: dict[Any, str], row: Any, keep: bool) -> None:
    if keep:
        owned[row.uuid] = row.name
    else:
        owned.pop(row.uuid, None)


def _acl_keys(row: Any, updates: Any) -> set[str]:
    """The owner keys an ACL change concerns: its own, and the one it had (external_ids rewritten)."""
    keys = {row.external_ids.get(K_KEY, "")}
    old = getattr(updates, "external_ids", None)  # the old values of the columns that changed only
    if isinstance(old, Mapping):
        keys.add(old.get(K_KEY, ""))
    return keys - {""}


def _port_info(r: Any) -> PortInfo:
    ids = r.external_ids
    return PortInfo(r.name, ids.get(K_NS, ""), ids.get(K_POD, ""), tuple(ipv4_of(list(r.addresses))),
                    ids.get(K_ROLE) == "management", ids.get(K_HELD) == "true")  # fmt: skip


def _ours(api: Any, table: str) -> dict[str, Any]:
    return {r.name: r for r in api.tables[table].rows.values() if r.external_ids.get(K_OWNER) == OWNER}


def _acl_key(row: Any) -> Acl:
    after = dict(row.options).get("apply-after-lb") == "true"
    logged = row.log and row.name and row.severity
    log = AclLog(row.name[0], row.severity[0], row.meter[0] if row.meter else "") if logged else None
    return Acl(
        row.direction, row.priority, row.match, row.action, after, row.external_ids.get(K_REF, ""), log
    )


class _Apply(Command):  # type: ignore[misc]
    """The diff, on the IDL thread. Reading a row's set columns converts every value (hundreds of
    addresses or ports), so a row is compared only when it changed since our last successful
    apply (an update of it reached the IDL) or what we want of it changed; else it is as we left it.
    Given the very desired state the last apply wrote (the reconcile that follows the echo of our
    own writes, or someone else's write to our rows), it visits only the rows changed since."""

    def __init__(
        self, api: Any, idl: _Idl, desired: Desired, keep: Collection[str], log_rate: int,
        release: Collection[str] = (),
    ) -> None:  # fmt: skip
        super().__init__(api)
        self.idl, self.desired, self.keep = idl, desired, keep
        self.log_rate, self.release = log_rate, release
        self.last, self.epoch = Desired(), 0
        self.created = self.changed = self.deleted = 0
        self.released = 0
        self.seen = Touched()

    def run_idl(self, txn: Any) -> None:
        self.created = self.changed = self.deleted = 0
        self.seen |= self.idl.take_touched()  # kept across retries of this command
        with self.idl.ports_lock:  # read here, on the IDL thread: after any reset for a replaced NB
            self.last, self.epoch = self.idl.applied, self.idl.epoch
        self._meter(txn)
        if self.desired is self.last:
            self._repair(txn)
        else:
            self._compare_all(txn)
        self._release()
        self.result = ApplyStats(self.created, self.changed, self.deleted)

    def _compare_all(self, txn: Any) -> None:
        """Every row we want: one equal to what the last apply wrote (most often the very object:
        the translation keeps an unchanged policy's) and not changed since is passed over without
        being looked up; the others are compared with their row. Then our rows no longer wanted go."""
        last, seen, desired = self.last, self.seen, self.desired
        for name, want in desired.address_sets.items():
            had = last.address_sets.get(name)
            if (had is not want and had != want) or ("Address_Set", name) in seen.names:
                self._fix(txn, "Address_Set", name)
        for name, pg in desired.port_groups.items():
            before = last.port_groups.get(name)
            if (
                (before is not pg and before != pg)
                or ("Port_Group", name) in seen.names
                or pg.owner in seen.keys
            ):
                self._fix(txn, "Port_Group", name)
        for table, wanted in (("Port_Group", desired.port_groups), ("Address_Set", desired.address_sets)):
            with self.idl.ports_lock:
                owned = set(self.idl.owned[table].values())
            for name in sorted(owned - wanted.keys()):
                self._fix(txn, table, name)

    def _repair(self, txn: Any) -> None:
        """The rows changed since the last apply, compared with what it wrote: one changed, missing
        or added by someone else is made ours again, as the full comparison would."""
        names = set(self.seen.names)
        keys = self.seen.keys  # ACLs changed: their groups by owner key (a scan: an index costs more)
        names.update(
            ("Port_Group", pg.name) for pg in self.desired.port_groups.values() if keys and pg.owner in keys
        )
        for table, name in sorted(names):
            self._fix(txn, table, name)

    def _fix(self, txn: Any, table: str, name: str) -> None:
        """Our row `name` of `table` made what `desired` wants of it, or dropped when it wants none
        (unless its owner is kept). A row of that name that is not ours: creating ours raises NameTaken."""
        row = by_name(self.api, table, name)
        if row is not None and row.external_ids.get(K_OWNER) != OWNER:
            row = None
        if table == "Address_Set" and (want := self.desired.address_sets.get(name)):
            self._address_set(txn, row, want)
        elif table == "Port_Group" and (group := self.desired.port_groups.get(name)):
            self._port_group(txn, row, group)
        elif row is not None and row.external_ids.get(K_KEY) not in self.keep:
            row.delete()
            self.deleted += 1

    def _release(self) -> None:
        """Enable each held port (written again after the NB was lost, cni/republish.py) that
        `desired` was computed with: in this transaction, with its port groups (no gap)."""
        self.released = 0
        for name in self.release:
            row = self._lsp(name)
            if row is not None and row.external_ids.get(K_HELD) == "true":
                row.enabled = []
                row.delkey("external_ids", K_HELD)
                self.released += 1

    def _meter(self, txn: Any) -> None:
        """The meter every logged ACL names: log packets per second, per node and ACL (fair)."""
        row = by_name(self.api, "Meter", METER)
        if row is not None and row.external_ids.get(K_OWNER) != OWNER:
            return  # an operator's own meter of that name: used as it is
        if row is not None and [b.rate for b in row.bands] == [self.log_rate]:
            return
        band = txn.insert(self.api.tables["Meter_Band"])
        band.action, band.rate, band.burst_size = "drop", self.log_rate, self.log_rate
        if row is None:
            row = self._new(txn, "Meter", METER, CLUSTER_OWNER)
            row.unit, row.fair = "pktps", [True]
        else:
            self.changed += 1
        row.bands = [band]

    def _new(self, txn: Any, table: str, name: str, owner: str) -> Any:
        if by_name(self.api, table, name) is not None:
            raise NameTaken(f"{table} {name} exists and was not created by {OWNER}")
        row = txn.insert(self.api.tables[table])
        row.name, row.external_ids = name, {K_OWNER: OWNER, K_KEY: owner}
        self.created += 1
        return row

    def _address_set(self, txn: Any, row: Any, want: AddressSet) -> None:
        if row is None:
            row = self._new(txn, "Address_Set", want.name, want.owner)
            row.addresses = sorted(want.addresses)
            return
        have = set(row.addresses)
        for ip in want.addresses - have:
            row.addvalue("addresses", ip)
        for ip in have - want.addresses:
            row.delvalue("addresses", ip)
        self.changed += have != want.addresses

    def _port_group(self, txn: Any, row: Any, want: PortGroup) -> None:
        ports = [p for p in (self._lsp(n) for n in sorted(want.ports)) if p is not None]
        if row is None:
            row = self._new(txn, "Port_Group", want.name, want.owner)
            row.setkey("external_ids", K_TYPES, want.types)
            row.ports = ports
            row.acls = [self._acl(txn, a, want.owner) for a in sorted(want.acls, key=str)]
            return
        types_differ = row.external_ids.get(K_TYPES) != want.types
        if types_differ:
            row.setkey("external_ids", K_TYPES, want.types)
        have_ports, want_ports = {p.uuid: p for p in row.ports}, {p.uuid: p for p in ports}
        for u in want_ports.keys() - have_ports.keys():
            row.addvalue("ports", want_ports[u])
        for u in have_ports.keys() - want_ports.keys():
            row.delvalue("ports", have_ports[u])
        have_acls = {_acl_key(a): a for a in row.acls}
        for acl in want.acls - have_acls.keys():
            row.addvalue("acls", self._acl(txn, acl, want.owner))
        for acl in have_acls.keys() - want.acls:
            row.delvalue("acls", have_acls[acl])
        self.changed += (
            types_differ or have_ports.keys() != want_ports.keys() or have_acls.keys() != want.acls
        )

    def _acl(self, txn: Any, acl: Acl, owner: str) -> Any:
        row = txn.insert(self.api.tables["ACL"])
        row.direction, row.priority, row.match, row.action = (
            acl.direction,
            acl.priority,
            acl.match,
            acl.action,
        )
        row.options = {"apply-after-lb": "true"} if acl.after_lb else {}
        row.external_ids = {K_OWNER: OWNER, K_KEY: owner, **({K_REF: acl.ref} if acl.ref else {})}
        if acl.log is not None:
            row.log, row.name, row.severity, row.meter = (
                True,
                [acl.log.name],
                [acl.log.severity],
                [acl.log.meter],
            )
        return row

    def _lsp(self, name: str) -> Any:
        return by_name(self.api, "Logical_Switch_Port", name)


class PolicyNorthbound:
    """One NB connection (IDL replica of the four tables above) for the netpol controller."""

    def __init__(self, remote: str, timeout: float = 10.0, *, log_rate: int = 20) -> None:
        self.log_rate = log_rate
        """Rate (packets/s per node and logged ACL) of the verdict-log meter."""
        self.db = connect(remote, "OVN_Northbound", TABLES, idl_class=_Idl, timeout=timeout)
        self._idl: _Idl = self.db.idl
        self.api = self.db.api
        self._lock = threading.Lock()
        self._read(self._reset_view)  # on the IDL's thread: no notification interleaves

    def _reset_view(self, api: Any) -> None:
        rows = api.tables["Logical_Switch_Port"].rows.values()
        owned = {t: {r.uuid: n for n, r in _ours(api, t).items()} for t in INDEXED}
        with self._idl.ports_lock:
            self._idl.port_view = {r.uuid: _port_info(r) for r in rows}
            self._idl.ports_version += 1
            self._idl.owned = owned

    def on_change(self, callback: Callable[[], None]) -> None:
        """`callback` (on the IDL thread) whenever a logical switch port or one of our rows appears,
        goes or changes: someone else's write to our rows is repaired by the apply it wakes (our
        own writes wake one apply too, which compares just those rows and writes nothing)."""
        self._idl.on_change = callback

    def ports(self) -> list[PortInfo]:
        with self._idl.ports_lock:
            return list(self._idl.port_view.values())

    def ports_version(self) -> int:
        """Changes when `ports()` would (read it first: a change after it is seen next time)."""
        return self._idl.ports_version

    def previous(self) -> dict[str, Frozen]:
        """What OVN holds of each policy: its port group's members and the directions it isolates."""

        def fn(api: Any) -> dict[str, Frozen]:
            out = {}
            for r in _ours(api, "Port_Group").values():
                key = r.external_ids.get(K_KEY, "")
                if "/" in key and not key.startswith("namespace:"):
                    types = frozenset(t for t in r.external_ids.get(K_TYPES, "").split(",") if t)
                    out[key] = Frozen(key, key.split("/")[0], types, frozenset(p.name for p in r.ports))
            return out

        return self._read(fn)  # type: ignore[no-any-return]

    def counts(self) -> dict[str, int]:
        def fn(api: Any) -> dict[str, int]:
            groups = _ours(api, "Port_Group").values()
            return {
                "port_groups": len(groups),
                "acls": sum(len(g.acls) for g in groups),
                "address_sets": len(_ours(api, "Address_Set")),
            }

        return self._read(fn)  # type: ignore[no-any-return]

    def apply(
        self, desired: Desired, keep: Collection[str] = (), release: Collection[str] = ()
    ) -> ApplyStats:
        """Make our rows equal `desired` in one transaction; rows owned by a key in `keep` stay;
        held ports named in `release` (the pods `desired` was computed with) are enabled."""
        with self._lock:
            cmd = _Apply(self.api, self._idl, desired, set(keep), self.log_rate, release)
            try:
                stats: ApplyStats = cmd.execute(check_error=True)
            except Exception:
                self._idl.give_back(cmd.seen)  # nothing was written: compare these rows next time
                raise
            self._idl.applied_by(desired, cmd.epoch)  # kept, not copied: a Desired is not changed later
        if cmd.released:
            log.warning("released %d held port(s) with their policies (the NB was rebuilt)", cmd.released)
        return stats

    def held(self) -> set[str]:
        """Names of the ports held until their policies are in (cni/republish.py)."""
        with self._idl.ports_lock:
            return {p.lsp for p in self._idl.port_view.values() if p.held}

    def on_replaced(self, callback: Callable[[], None]) -> None:
        """`callback` (on the IDL thread) once the NB was replaced by an empty one: what the last
        apply wrote is forgotten and the port view read again, so the next apply writes it all."""

        def reset() -> None:
            self._idl.forget_applied()
            self._reset_view(self.api)
            callback()

        self.db.on_replaced(reset)

    def _read(self, fn: Callable[[Any], Any]) -> Any:
        return read(self.api, fn)

    def close(self) -> None:
        self.db.stop()
