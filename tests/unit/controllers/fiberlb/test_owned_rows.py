"""The ovn backend's index of its own Load_Balancer rows (controllers/fiberlb/owned_rows.py)."""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from ovs.db import data, types  # type: ignore[import-untyped]

from controllers.fiberlb.ovn_backend import _ours
from controllers.fiberlb.owned_rows import OwnedRows, holds, references, size

OURS = {"fiberlb.owner": "fiberlb-controller"}


@dataclass
class FakeRow:
    external_ids: dict[str, str]
    uuid: uuid.UUID = field(default_factory=uuid.uuid4)
    _data: Any = None


def test_rows_of_ours_are_indexed_and_reported_changed_once() -> None:
    index = OwnedRows(_ours)
    mine, other = FakeRow(dict(OURS)), FakeRow({"owner": "someone"})
    index.on_row("create", mine)
    index.on_row("create", other)
    assert index.uuids == {mine.uuid}
    assert index.take_changed() == {mine.uuid}
    assert index.take_changed() == set()  # nothing changed since
    index.on_row("update", mine)
    assert index.take_changed() == {mine.uuid}


def test_a_row_deleted_or_no_longer_ours_leaves_the_index() -> None:
    index = OwnedRows(_ours)
    a, b = FakeRow(dict(OURS)), FakeRow(dict(OURS))
    index.reset([a, b, FakeRow({})])
    assert index.uuids == index.changed == {a.uuid, b.uuid}
    index.on_row("delete", a)
    b.external_ids = {}  # someone rewrote its external_ids: no longer ours to put back
    index.on_row("update", b)
    assert index.uuids == set() and index.take_changed() == set()


def test_put_back_keeps_only_rows_still_ours() -> None:
    index = OwnedRows(_ours)
    a, b = FakeRow(dict(OURS)), FakeRow(dict(OURS))
    index.reset([a, b])
    taken = index.take_changed()
    index.on_row("delete", b)
    index.put_back(taken)  # the transaction that checked them failed
    assert index.changed == {a.uuid}


def test_reference_columns_are_read_without_converting_rows() -> None:
    members = [uuid.uuid4() for _ in range(3)]
    column = types.Type(types.BaseType(types.UuidType), n_min=0, n_max=sys.maxsize)
    datum = data.Datum(column, {data.Atom(types.UuidType, u): None for u in members})
    group = FakeRow({}, _data={"load_balancer": datum})
    got = references(group, "load_balancer")
    assert size(got) == 3
    assert all(holds(got, u) for u in members) and not holds(got, uuid.uuid4())
    inserted = FakeRow({})  # a row inserted in this transaction has no committed value
    assert references(inserted, "load_balancer") is None
    assert size(None) == 0 and not holds(None, members[0])
