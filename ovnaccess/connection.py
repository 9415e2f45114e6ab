"""Connections: one per object, to a standalone database or through a RAFT cluster's leader.

`connect(remotes, schema, tables=...)` returns an `Ovsdb`: the ovsdbapp API object (whose
transactions retry, `retry.py`), its row watcher and its connection. `remotes` is a remote list
as OVN's tools take it; for a clustered database python-ovs monitors and writes through the
leader only, and on losing it (killed, or an election) reconnects member by member until it
finds the new one, without backoff for the first round over the list and then with one that
we cap at `RECONNECT_MAX_BACKOFF_MS`, its minimum (python-ovs's default grows to 8 s).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ovsdbapp.backend.ovs_idl import connection, idlutils  # type: ignore[import-untyped]
from ovsdbapp.schema.open_vswitch import impl_idl as ovs_impl  # type: ignore[import-untyped]
from ovsdbapp.schema.ovn_northbound import impl_idl as nb_impl  # type: ignore[import-untyped]
from ovsdbapp.schema.ovn_southbound import impl_idl as sb_impl  # type: ignore[import-untyped]

from ovnaccess import tls
from ovnaccess.remotes import InvalidRemote, UnresolvedRemote, parse_remotes, resolve_remotes
from ovnaccess.retry import NoWaitOvsTransaction, RetryingTransaction, RetryPolicy
from ovnaccess.watch import RowHook, Watcher

log = logging.getLogger(__name__)

RECONNECT_MAX_BACKOFF_MS = 1000
Tables = Mapping[str, Sequence[str] | None]
"""Table -> the columns to replicate (None: all of them)."""
GLOBAL_TABLES = {"OVN_Northbound": "NB_Global"}
"""The table whose one row stands for a standalone database's file (OvsdbIdl); `connect` monitors
it (its name only, when the caller did not ask for it)."""


class OvsdbUnavailable(RuntimeError):
    pass


class OvsdbIdl(connection.OvsdbIdl):  # type: ignore[misc]
    """ovsdbapp's IDL without its eventlet yield: ovsdbapp sleeps (time.sleep(0)) after every row
    of an update; with other threads busy each sleep can cost a GIL switch interval (5 ms)
    before the IDL thread runs again, delaying commits and notifications.

    Also: a clustered database *replaced* (wiped and created again: a new cluster id) is followed,
    not refused. python-ovs remembers the highest RAFT index it has seen and calls any server below
    it "stale" forever (as ovn-northd does until `nb-cluster-state-reset`); a new cluster id resets
    that, and once monitoring the new database, `replaced_hooks` run (on the IDL thread) so the
    component resynchronises what it wrote.

    A standalone database has no cluster id: there, the database's global row (`NB_Global`, which
    ovn-northd or our agent inserts once into a new database; `connect` monitors it) stands for the
    file. Monitoring again after a reconnection and finding it gone or another row, the database
    was replaced too; a server merely restarted on its file still has the same row."""

    _synced_session = -1
    reconnects = 0
    """Times monitoring started again after a reconnection (ovsdb_client_reconnects_total)."""
    cluster_ids: tuple[str | None, bool] = (None, False)
    """(the cluster id monitored last, whether a new one is waiting for its first monitor reply)"""
    replaced = 0
    """Times the database was found replaced (a new cluster id, or a standalone one's new global row)."""
    global_row: str | None = None
    """The database's global row as last monitored ("": none yet; None: not watched or not yet)."""
    _global_session = -1

    def cooperative_yield(self) -> None:
        pass

    @property
    def replaced_hooks(self) -> list[Callable[[], object]]:
        hooks: list[Callable[[], object]] = self.__dict__.setdefault("_replaced_hooks", [])
        return hooks

    def _Idl__check_server_db(self) -> bool:  # python-ovs's private check, which this wraps
        rows = (self.server_tables or {}).get("Database")
        row = next((r for r in rows.rows.values() if r.name == self._db.name), None) if rows else None
        cid = str(row.cid[0]) if row is not None and row.cid else None
        known, pending = self.cluster_ids
        if cid is not None and known is not None and cid != known:
            log.warning(
                "%s: %s was replaced (cluster id %s, was %s): following the new database and resyncing",
                self.session_name(), self._db.name, cid, known,
            )  # fmt: skip
            self._min_index = 0
            pending = True
        if cid is not None:
            self.cluster_ids = (cid, pending)
        return bool(super()._Idl__check_server_db())

    def run(self) -> Any:
        """Also: once monitoring again after a reconnection (a new leader), count the replica as
        changed. A transaction whose commit was cut off waits for a change before running again,
        and a resync that brings no new rows would otherwise leave it waiting its whole timeout."""
        changed = super().run()
        session = self._session.get_seqno()
        if session != self._synced_session and self.state == self.IDL_S_MONITORING:
            if self._synced_session != -1:
                self.change_seqno += 1
                self.reconnects += 1
            self._synced_session = session
        self._follow_global_row(session)
        cid, pending = self.cluster_ids
        if pending and self.state == self.IDL_S_MONITORING:
            self.cluster_ids = (cid, False)
            self.replaced += 1
            for hook in self.replaced_hooks:
                hook()
        return changed

    def _global_row(self) -> str | None:
        table = self.tables.get(GLOBAL_TABLES.get(self._db.name, ""))
        return None if table is None else str(next(iter(table.rows), ""))

    def _follow_global_row(self, session: int) -> None:
        """Note the global row while connected and monitoring; on the first monitor reply of a new
        connection to a standalone database, that row gone or another one means the database was
        replaced (see the class doc): its replaced hooks then run as for a new cluster id."""
        if self.state != self.IDL_S_MONITORING or not self._session.is_connected():
            return  # python-ovs may empty the replica while it reconnects
        now, known = self._global_row(), self.global_row
        if session != self._global_session:
            if self._global_session != -1 and self.cluster_ids[0] is None and known and now != known:
                log.warning(
                    "%s: %s was replaced (a standalone database; global row %s, was %s): resyncing",
                    self.session_name(), self._db.name, now or "none yet", known,
                )  # fmt: skip
                self.cluster_ids = (None, True)
            self._global_session = session
        self.global_row = now


class NotifyingIdl(OvsdbIdl):
    """Tells the row watcher and the registered hooks about every row it sees change."""

    watcher: Watcher
    row_hooks: dict[str, list[RowHook]]

    def __init__(self, remote: str, helper: Any) -> None:
        self.watcher, self.row_hooks = Watcher(), {}
        super().__init__(remote, helper)

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        table = row._table.name
        for hook in self.row_hooks.get(table, ()):
            hook(event, row)
        if event in ("create", "update"):
            self.watcher.notify(table, row)


class _OwnConnection:
    """ovsdbapp's Backend keeps its connection class-wide: the first one made in a process would
    serve every later API object (never starting theirs). Keep it per object, so two connections
    in one process really are two (as two agents' are)."""

    _own_connection: Any = None
    retry_policy = RetryPolicy()

    @property
    def ovsdb_connection(self) -> Any:
        return self._own_connection

    @ovsdb_connection.setter
    def ovsdb_connection(self, conn: Any) -> None:
        self._own_connection = conn

    def create_transaction(self, check_error: bool = False, log_errors: bool = True, **kwargs: Any) -> Any:
        conn = self.ovsdb_connection
        return RetryingTransaction(self, conn, conn.timeout, check_error=check_error, log_errors=log_errors)


class NbApi(_OwnConnection, nb_impl.OvnNbApiIdlImpl):  # type: ignore[misc]
    pass


class SbApi(_OwnConnection, sb_impl.OvnSbApiIdlImpl):  # type: ignore[misc]
    pass


class OvsApi(_OwnConnection, ovs_impl.OvsdbIdl):  # type: ignore[misc]
    def create_transaction(self, check_error: bool = False, log_errors: bool = True, **kwargs: Any) -> Any:
        conn = self.ovsdb_connection
        return NoWaitOvsTransaction(self, conn, check_error=check_error, log_errors=log_errors)


API_CLASSES: dict[str, type] = {"Open_vSwitch": OvsApi, "OVN_Northbound": NbApi, "OVN_Southbound": SbApi}


@dataclass
class Ovsdb:
    """A connected database: the ovsdbapp API object, its IDL and connection."""

    api: Any
    conn: Any

    @property
    def idl(self) -> Any:
        return self.conn.idl

    @property
    def watcher(self) -> Watcher:
        watcher: Watcher = self.conn.idl.watcher
        return watcher

    def on_replaced(self, hook: Callable[[], object]) -> None:
        """Call `hook` (on the IDL thread: it must not block) each time the database is found
        replaced by a new, empty one and its contents are monitored again (OvsdbIdl)."""
        self.conn.idl.replaced_hooks.append(hook)

    def on_row_change(self, table: str, hook: RowHook) -> None:
        """Call `hook` for every change of `table` from now on (register before relying on it)."""
        self.conn.idl.row_hooks.setdefault(table, []).append(hook)

    def connected(self) -> bool:
        try:
            return bool(self.conn.idl._session.is_connected())
        except AttributeError:
            return False

    def remote(self) -> str:
        """The server the connection is on now (for a cluster: the leader, once found)."""
        return str(self.conn.idl._session.get_name())

    def stop(self) -> None:
        self.conn.stop(timeout=5)


def c_json_parser() -> bool:
    """True when python-ovs parses OVSDB JSON with its C extension (scripts/ovs_json_accel.py)."""
    import ovs.json  # type: ignore[import-untyped]

    return bool(ovs.json.PARSER == ovs.json.PARSER_C)


def connect(
    remotes: str,
    schema: str,
    tables: Tables,
    *,
    idl_class: type[OvsdbIdl] = NotifyingIdl,
    timeout: float = 10.0,
    retry: RetryPolicy | None = None,
) -> Ovsdb:
    """Connect to `schema` at `remotes` (one remote, or every member of a cluster), replicating
    `tables`. OvsdbUnavailable when no server answers; InvalidRemote for a malformed list;
    tls.TlsNotConfigured for an `ssl:` remote without the client's files (`tls.use`)."""
    entries = parse_remotes(remotes)
    tls.require_for(entries)
    try:
        remote = ",".join(resolve_remotes(entries))
    except UnresolvedRemote as e:
        raise OvsdbUnavailable(str(e)) from e
    try:
        helper = idlutils.get_schema_helper(remote, schema)  # any member answers this
    except Exception as e:
        raise OvsdbUnavailable(f"cannot reach {schema} at {remote}: {e}") from e
    for table, columns in tables.items():
        if columns is None:
            helper.register_table(table)
        else:
            helper.register_columns(table, list(columns))
    if schema in GLOBAL_TABLES and GLOBAL_TABLES[schema] not in tables:
        helper.register_columns(GLOBAL_TABLES[schema], ["name"])
    idl = idl_class(remote, helper)
    idl._session.reconnect.set_backoff(1000, RECONNECT_MAX_BACKOFF_MS)
    conn = connection.Connection(idl, timeout)
    try:
        api = API_CLASSES[schema](conn)
    except Exception as e:  # no member became leader / monitoring within `timeout`
        conn.stop(timeout=1)
        raise OvsdbUnavailable(f"cannot monitor {schema} at {remote}: {e}") from e
    if retry is not None:
        api.retry_policy = retry
    return Ovsdb(api=api, conn=conn)


__all__ = ["InvalidRemote", "Ovsdb", "OvsdbUnavailable", "connect"]
