"""Address bookkeeping of OVN IPAM: parsing OVN address entries, the lowest free address, the cache."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

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
