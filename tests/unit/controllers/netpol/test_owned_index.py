"""netpol's index of its own NB rows (controllers/netpol/ovn_apply.py): an apply finds its port groups
and address sets by uuid, and knows which groups' ACLs changed by the ACLs' owner keys, without
reading every row."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from controllers.netpol.ovn_apply import K_KEY, K_OWNER, OWNER, Touched, _acl_keys, _Idl


@dataclass
class FakeTable:
    name: str
    rows: dict[uuid.UUID, Any] = field(default_factory=dict)


@dataclass
class FakeRow:
    _table: FakeTable
    name: str
    external_ids: dict[str, str]
    uuid: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass
class OldColumns:
    """What python-ovs passes as `updates`: the old values of the changed columns only."""

    external_ids: dict[str, str]


def ours(key: str) -> dict[str, str]:
    return {K_OWNER: OWNER, K_KEY: key}


def idl() -> _Idl:
    i = _Idl.__new__(_Idl)  # the notification logic alone, without a connection
    i.ports_lock, i.port_view, i.touched, i.ports_version = threading.Lock(), {}, Touched(), 0
    i.owned = {"Port_Group": {}, "Address_Set": {}}
    return i


def test_our_port_groups_are_indexed_as_they_come_and_go() -> None:
    i, table = idl(), FakeTable("Port_Group")
    mine, foreign = FakeRow(table, "pg_a", ours("ns/a")), FakeRow(table, "pg_x", {"owner": "someone"})
    for row in (mine, foreign):
        table.rows[row.uuid] = row
        i.notify("create", row)
    assert i.owned["Port_Group"] == {mine.uuid: "pg_a"}
    assert i.take_touched() == Touched(set(), {("Port_Group", "pg_a"), ("Port_Group", "pg_x")})
    mine.external_ids = {}  # someone took our owner key off: no longer ours
    i.notify("update", mine, OldColumns(ours("ns/a")))
    assert i.owned["Port_Group"] == {}
    mine.external_ids = ours("ns/a")
    i.notify("update", mine)
    i.notify("delete", mine)
    assert i.owned["Port_Group"] == {}
    assert i.take_touched().names == {("Port_Group", "pg_a")}  # deleted: its name still says which row


def test_a_changed_acl_names_its_owner_key_old_and_new() -> None:
    i, table = idl(), FakeTable("ACL")
    acl = FakeRow(table, "", ours("ns/a"))
    i.notify("update", acl, object())  # its match changed: external_ids not among the old columns
    assert i.take_touched() == Touched({"ns/a"})
    acl.external_ids = ours("ns/b")
    i.notify("update", acl, OldColumns(ours("ns/a")))
    assert i.take_touched().keys == {"ns/a", "ns/b"}
    assert i.take_touched() == Touched()
    assert _acl_keys(FakeRow(table, "", {}), None) == set()
