"""Reads on an IDL replica: a read-only command and row lookups (used inside commands too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ovsdbapp.backend.ovs_idl import command, idlutils  # type: ignore[import-untyped]

Command = command.BaseCommand
"""The base of every write a component defines (`run_idl(txn)` on the connection thread)."""


class Read(command.BaseCommand):  # type: ignore[misc]
    """A read-only command: `fn(api)` runs under the connection lock and returns plain values."""

    READ_ONLY = True

    def __init__(self, api: Any, fn: Callable[[Any], Any]) -> None:
        super().__init__(api)
        self.fn = fn

    def run_idl(self, txn: Any) -> None:
        self.result = self.fn(self.api)


def read(api: Any, fn: Callable[[Any], Any]) -> Any:
    """`fn(api)` on the replica, under the connection lock (no other update interleaves)."""
    return Read(api, fn).execute(check_error=True)


def table_rows(api: Any, table: str) -> list[Any]:
    return list(api.tables[table].rows.values())


def by_name(api: Any, table: str, name: str) -> Any:
    """The row of `table` named `name`, through the IDL's index on `name` (None if absent).

    Tables with a schema index on `name` (Interface, Logical_Switch_Port, Load_Balancer, ...)
    get an IDL index from ovsdbapp: a lookup is O(log n), where a scan converts every row."""
    return idlutils.row_by_value(api.idl, table, "name", name, None)
