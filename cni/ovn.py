"""OVSDB through ovsdbapp: connections, row watching and OVS port binding (`ovn_nb.py`: NB topology).

These two modules are the only ovsdbapp importers in cni/.

One connection per database per process, built in main(). Each connection's IDL tells a
`Watcher` about every row it sees change, so waiting for ovn-controller
(`Interface.external_ids:ovn-installed`) or ovn-northd (`dynamic_addresses`) is a wait on
a `threading.Event` that the update itself sets: we watch the database, never poll it.
Expectations are registered *before* the write that triggers them, so no update is missed.

NB topology (spec): one switch `k8s-<namespace>` per namespace with a subnet carved from
the cluster CIDR, one router `k8s-cluster-router` with a port per switch, one LSP per pod.
Every row this suite writes carries `external_ids` `prismnet.*` keys saying who owns it.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ovsdbapp.backend.ovs_idl import (  # type: ignore[import-untyped]
    command,
    connection,
    idlutils,
    transaction,
)
from ovsdbapp.schema.open_vswitch import impl_idl as ovs_impl  # type: ignore[import-untyped]
from ovsdbapp.schema.ovn_northbound import impl_idl as nb_impl  # type: ignore[import-untyped]

log = logging.getLogger(__name__)

ROUTER = "k8s-cluster-router"
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
OVS_COLUMNS = {
    "Open_vSwitch": ["external_ids", "bridges"],
    "Bridge": ["name", "ports", "datapath_type"],
    "Port": ["name", "interfaces"],
    "Interface": ["name", "type", "external_ids"],
}
"""Only what we read or write: ovs-vswitchd rewrites every Interface's statistics, status,
link and ofport columns, and each such update would be parsed (in pure Python) by our IDL."""
NB_TABLES = (
    "NB_Global",
    "Logical_Switch",
    "Logical_Switch_Port",
    "Logical_Router",
    "Logical_Router_Port",
    "Logical_Router_Static_Route",
    "Logical_Router_Policy",
    "Address_Set",
)


class OvsdbUnavailable(RuntimeError):
    pass


class Expectation:
    def __init__(self, predicate: Callable[[Any], Any]) -> None:
        self.predicate, self.event, self.value = predicate, threading.Event(), None
        self.fired_at = 0.0
        """time.perf_counter() when the matching update arrived."""

    def wait(self, timeout: float) -> Any:
        """The predicate's first truthy value, or None on timeout."""
        return self.value if self.event.wait(timeout) else None


class Watcher:
    """Row updates from the IDL thread, matched against waiting callers by (table, name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: dict[tuple[str, str], list[Expectation]] = {}

    @contextmanager
    def expect(self, table: str, name: str, predicate: Callable[[Any], Any]) -> Iterator[Expectation]:
        exp, key = Expectation(predicate), (table, name)
        with self._lock:
            self._waits.setdefault(key, []).append(exp)
        try:
            yield exp
        finally:
            with self._lock:
                waits = self._waits.get(key, [])
                if exp in waits:
                    waits.remove(exp)
                if not waits:
                    self._waits.pop(key, None)

    def notify(self, table: str, row: Any) -> None:
        key = (table, str(getattr(row, "name", "")))
        with self._lock:
            waits = list(self._waits.get(key, ()))
        for exp in waits:
            if exp.event.is_set():
                continue
            try:
                value = exp.predicate(row)
            except (AttributeError, KeyError, TypeError):
                continue
            if value:
                exp.value, exp.fired_at = value, time.perf_counter()
                exp.event.set()


RowHook = Callable[[str, Any], None]
"""Called on the IDL thread with ("create"|"update"|"delete", row) for every change of a table."""


class _NotifyingIdl(connection.OvsdbIdl):  # type: ignore[misc]
    watcher: Watcher
    row_hooks: dict[str, list[RowHook]]

    def cooperative_yield(self) -> None:
        """ovsdbapp yields the GIL (time.sleep(0)) after every row of an update, for eventlet.
        With other threads busy, each yield can cost a GIL switch interval (5 ms) before the
        IDL thread runs again, delaying commits and the ovn-installed notification."""

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        table = row._table.name
        for hook in self.row_hooks.get(table, ()):
            hook(event, row)
        if event in ("create", "update"):
            self.watcher.notify(table, row)


class _NoWaitTransaction(ovs_impl.OvsVsctlTransaction):  # type: ignore[misc]
    """ovs-vsctl --no-wait: ovsdbapp's default OVS transaction bumps next_cfg and then blocks the
    connection thread until ovs-vswitchd has reconfigured (~10 ms, serialising every request).
    We wait for ovn-installed instead, which implies vswitchd has the port."""

    def pre_commit(self, txn: Any) -> None:
        txn.expected_ifaces = set()  # add_port records into it

    def post_commit(self, txn: Any) -> None:
        transaction.Transaction.post_commit(self, txn)


class _OwnConnection:
    """ovsdbapp's Backend keeps its connection class-wide: the first one made in a process
    would serve every later API object (never starting theirs). Keep it per object, so two
    connections in one process really are two (as two agents' are)."""

    _own_connection: Any = None

    @property
    def ovsdb_connection(self) -> Any:
        return self._own_connection

    @ovsdb_connection.setter
    def ovsdb_connection(self, conn: Any) -> None:
        self._own_connection = conn


class _NbApi(_OwnConnection, nb_impl.OvnNbApiIdlImpl):  # type: ignore[misc]
    pass


class _NoWaitOvsApi(_OwnConnection, ovs_impl.OvsdbIdl):  # type: ignore[misc]
    def create_transaction(self, check_error: bool = False, log_errors: bool = True, **kwargs: Any) -> Any:
        return _NoWaitTransaction(self, self.ovsdb_connection, check_error=check_error, log_errors=log_errors)


@dataclass
class Ovsdb:
    """A connected database: the ovsdbapp API object plus its watcher."""

    api: Any
    watcher: Watcher
    conn: Any

    def on_row_change(self, table: str, hook: RowHook) -> None:
        """Call `hook` for every change of `table` from now on (register before relying on it)."""
        self.conn.idl.row_hooks.setdefault(table, []).append(hook)

    def connected(self) -> bool:
        try:
            return bool(self.conn.idl._session.is_connected())
        except AttributeError:
            return False

    def stop(self) -> None:
        self.conn.stop(timeout=5)


def c_json_parser() -> bool:
    """True when python-ovs parses OVSDB JSON with its C extension (scripts/ovs_json_accel.py)."""
    import ovs.json  # type: ignore[import-untyped]

    return bool(ovs.json.PARSER == ovs.json.PARSER_C)


def connect(remote: str, schema: str, timeout: float = 10.0) -> Ovsdb:
    """Connect to OVSDB `remote` (schema Open_vSwitch or OVN_Northbound)."""
    watcher = Watcher()
    try:
        helper = idlutils.get_schema_helper(remote, schema)
    except Exception as e:
        raise OvsdbUnavailable(f"cannot reach {schema} at {remote}: {e}") from e
    if schema == "Open_vSwitch":
        for table, columns in OVS_COLUMNS.items():
            helper.register_columns(table, columns)
    else:
        for t in NB_TABLES:
            helper.register_table(t)
    idl = _NotifyingIdl(remote, helper)
    idl.watcher, idl.row_hooks = watcher, {}
    conn = connection.Connection(idl, timeout)
    api = _NoWaitOvsApi(conn) if schema == "Open_vSwitch" else _NbApi(conn)
    return Ovsdb(api=api, watcher=watcher, conn=conn)


@dataclass(frozen=True, slots=True)
class OvsPort:
    name: str
    external_ids: dict[str, str]
    installed: bool


class _Read(command.BaseCommand):  # type: ignore[misc]
    """A read-only command: `fn(idl)` runs under the connection lock and returns plain values."""

    READ_ONLY = True

    def __init__(self, api: Any, fn: Callable[[Any], Any]) -> None:
        super().__init__(api)
        self.fn = fn

    def run_idl(self, txn: Any) -> None:
        self.result = self.fn(self.api)


def _rows(api: Any, table: str) -> list[Any]:
    return list(api.tables[table].rows.values())


def by_name(api: Any, table: str, name: str) -> Any:
    """The row of `table` named `name`, through the IDL's index on `name` (None if absent).

    Interface and Logical_Switch_Port have a schema index on `name`, which ovsdbapp turns
    into an IDL index: a lookup is O(log n), where a scan converts every row's columns."""
    return idlutils.row_by_value(api.idl, table, "name", name, None)


class _Unbind(command.BaseCommand):  # type: ignore[misc]
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
            lambda api: [r.datapath_type for r in _rows(api, "Bridge") if r.name == self._bridge]
        )
        return bool(types) and types[0] == "netdev"

    def system_id(self) -> str:
        rows = self._read(lambda api: [dict(r.external_ids) for r in _rows(api, "Open_vSwitch")])
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
                for r in _rows(api, "Interface")
                if K_CID in r.external_ids
            ]

        return self._read(fn)  # type: ignore[no-any-return]

    def _read(self, fn: Callable[[Any], Any]) -> Any:
        return _Read(self._api, fn).execute(check_error=True)


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
