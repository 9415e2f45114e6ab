"""Which Load_Balancer rows are ours, kept from the IDL's row notifications (the ovn backend).

The group repair (`OvnBackend.attach`, every 2 s) used to convert every Load_Balancer row's
`external_ids` and the group's whole `load_balancer` column on each run: at 10,000 Services that
work was most of fiberlb-controller's CPU per change. With this index it looks at the rows that
changed since its last run, and at every row of ours only when the group holds fewer references
than we own rows (someone took some out) or at its periodic full check.

Everything here runs on the connection's thread (row hooks and commands both do), so no lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from ovs.db import data, types  # type: ignore[import-untyped]


class OwnedRows:
    """Uuids of the rows `owns` accepts, and of those created or changed since `take_changed`."""

    def __init__(self, owns: Callable[[Any], bool]) -> None:
        self._owns = owns
        self.uuids: set[uuid.UUID] = set()
        self.changed: set[uuid.UUID] = set()

    def on_row(self, event: str, row: Any) -> None:
        """A row hook (`Ovsdb.on_row_change`): "create", "update" or "delete" of one row."""
        if event != "delete" and self._owns(row):
            self.uuids.add(row.uuid)
            self.changed.add(row.uuid)
        else:  # gone, or no longer carrying our owner key: not ours to keep in the group
            self.uuids.discard(row.uuid)
            self.changed.discard(row.uuid)

    def reset(self, rows: Iterable[Any]) -> None:
        """Every row of the table read again (at connect, and after the database was replaced)."""
        self.uuids = {r.uuid for r in rows if self._owns(r)}
        self.changed = set(self.uuids)

    def take_changed(self) -> set[uuid.UUID]:
        changed, self.changed = self.changed, set()
        return changed

    def put_back(self, uuids: Iterable[uuid.UUID]) -> None:
        """Rows taken by `take_changed` that a failed transaction did not check: next time."""
        self.changed |= set(uuids) & self.uuids


def references(row: Any, column: str) -> Any:
    """The committed value of a reference column as python-ovs holds it (a Datum: `len` and `in`
    without converting each reference to a Row, which `getattr` does); None for a row inserted in
    the current transaction."""
    stored = getattr(row, "_data", None)
    return None if stored is None else stored.get(column)


def holds(datum: Any, row_uuid: uuid.UUID) -> bool:
    """Whether a reference column's Datum (from `references`) holds `row_uuid`."""
    return datum is not None and data.Atom(types.UuidType, row_uuid) in datum


def size(datum: Any) -> int:
    return 0 if datum is None else len(datum.values)
