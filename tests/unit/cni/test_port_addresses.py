"""Address bookkeeping of OVN IPAM: parsing OVN address entries, the lowest free address, the cache."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from cni.address_index import AddressIndex
from cni.ovn_nb import PortAddresses, _ipv4_ints, _lowest_free


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def test_ipv4_words_of_ovn_address_entries() -> None:
    entries = [
        "0a:58:0a:00:00:05 10.0.0.5 fd00::5",
        "router",
        "dynamic",
        "0a:58:0a:00:00:07 10.0.0.7 10.0.1.7",
    ]
    assert _ipv4_ints(entries) == {ip("10.0.0.5"), ip("10.0.0.7"), ip("10.0.1.7")}
    assert _ipv4_ints(["0a:58:00:00:00:01 300.1.1.1", "unknown"]) == set()


def test_lowest_free_skips_network_broadcast_and_used() -> None:
    net = ipaddress.IPv4Network("10.0.0.0/29")
    assert _lowest_free(net, set()) == ipaddress.IPv4Address("10.0.0.1")
    assert _lowest_free(net, {ip("10.0.0.1"), ip("10.0.0.2")}) == ipaddress.IPv4Address("10.0.0.3")
    assert _lowest_free(net, {ip(f"10.0.0.{i}") for i in range(1, 7)}) is None  # .7 is broadcast


def test_lowest_free_in_point_to_point_and_host_subnets() -> None:
    assert _lowest_free(ipaddress.IPv4Network("10.0.0.2/31"), set()) == ipaddress.IPv4Address("10.0.0.2")
    assert _lowest_free(ipaddress.IPv4Network("10.0.0.9/32"), {ip("10.0.0.9")}) is None


@dataclass
class Row:
    uuid: str
    addresses: list[str]
    dynamic_addresses: list[str] = field(default_factory=list)


def test_cache_keeps_parsed_addresses_until_the_row_changes() -> None:
    held, row = PortAddresses(), Row("u1", ["0a:58:0a:00:00:05 10.0.0.5"])
    assert held.of(row) == {ip("10.0.0.5")}
    row.addresses = ["0a:58:0a:00:00:06 10.0.0.6"]
    assert held.of(row) == {ip("10.0.0.5")}, "unchanged until the IDL reports the update"
    held.on_change("update", row)
    assert held.of(row) == {ip("10.0.0.6")}
    held.on_change("delete", row)
    row.dynamic_addresses = ["0a:58:0a:00:00:09 10.0.0.9"]
    assert held.of(row) == {ip("10.0.0.6"), ip("10.0.0.9")}


class CountingRow(Row):
    """A row that counts how often it is looked at (python-ovs converts a column on each read)."""

    reads = 0

    def __getattribute__(self, name: str) -> object:
        if name in ("uuid", "addresses"):
            CountingRow.reads += 1
        return super().__getattribute__(name)


def test_held_in_reads_only_the_rows_reported_changed() -> None:
    rows = {f"u{i}": CountingRow(f"u{i}", [f"0a:58:0a:00:{i >> 8:02x}:{i & 255:02x} 10.0.{i >> 8}.{i & 255}"])
            for i in range(2, 1000)}  # fmt: skip
    held = PortAddresses()
    first, last = ip("10.0.1.0"), ip("10.0.1.255")
    assert held.held_in(rows, first, last) == list(range(first, last + 1))  # the first call reads the table
    CountingRow.reads = 0
    assert held.held_in(rows, first, last) == list(range(first, last + 1))
    assert CountingRow.reads == 0, "an allocation must not look at every port again"
    rows["u300"].addresses = ["0a:58:0a:00:02:0a 10.0.2.10"]  # .1.44 let go
    held.on_change("update", rows["u300"])
    del rows["u301"]
    held.on_change("delete", CountingRow("u301", []))
    rows["new"] = CountingRow("new", ["0a:58:0a:00:01:2c 10.0.1.44"])
    held.on_change("create", rows["new"])
    CountingRow.reads = 0
    got = held.held_in(rows, first, last)
    assert CountingRow.reads <= 6  # the updated and the created row only (uuid twice, addresses)
    assert ip("10.0.1.45") not in got and ip("10.0.1.44") in got and len(got) == 255


def test_held_in_recovers_rows_deleted_unreported() -> None:
    rows = {"a": Row("a", ["0a:58:0a:00:00:05 10.0.0.5"]), "b": Row("b", ["0a:58:0a:00:00:06 10.0.0.6"])}
    held = PortAddresses()
    assert held.held_in(rows, ip("10.0.0.0"), ip("10.0.0.255")) == [ip("10.0.0.5"), ip("10.0.0.6")]
    del rows["b"]  # the replica refilled after a reconnect: no delete reported
    assert held.held_in(rows, ip("10.0.0.0"), ip("10.0.0.255")) == [ip("10.0.0.5")]


def test_an_address_two_ports_hold_stays_until_both_let_go() -> None:
    index = AddressIndex()
    index.put("a", [5, 9])
    index.put("b", [5])
    index.drop("a")
    assert index.within(0, 10) == [5]
    index.put("b", [7])
    assert index.within(0, 10) == [7] and index.within(8, 10) == []
