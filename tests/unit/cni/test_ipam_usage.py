"""IPAM figures for /metrics: used/free per subnet from NB rows, the cluster CIDR's totals, tunnels."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace
from typing import Any

from cni.ipam_usage import SubnetUsage, cluster_usage, subnet_usage
from cni.ovn import OvsPorts
from cni.ovn_nb import PortAddresses


def api_with(tables: dict[str, list[Any]]) -> Any:
    return SimpleNamespace(
        tables={t: SimpleNamespace(rows=dict(enumerate(rows))) for t, rows in tables.items()}
    )


def switch(subnet: str, gateway: str, exclude: str = "") -> Any:
    ids = {"prismnet.subnet": subnet, "prismnet.gateway": gateway} if subnet else {}
    return SimpleNamespace(external_ids=ids, other_config={"exclude_ips": exclude} if exclude else {})


def port(uuid: str, *addresses: str) -> Any:
    return SimpleNamespace(uuid=uuid, addresses=list(addresses), dynamic_addresses=[])


def test_each_address_counts_in_the_subnet_holding_it() -> None:
    api = api_with({
        "Logical_Switch": [
            switch("10.244.0.0/24", "10.244.0.1"),
            switch("10.244.1.0/24", "10.244.1.1", exclude="10.244.1.10..10.244.1.19"),
            switch("", ""),  # an L2-only switch: not ours to count
        ],
        "Logical_Switch_Port": [
            port("a", "0a:58:0a:f4:00:05 10.244.0.5"),
            port("b", "0a:58:0a:f4:00:06 10.244.0.6"),
            port("c", "0a:58:0a:f4:01:05 10.244.1.5"),
            port("d", "0a:58:0a:f4:01:0c 10.244.1.12"),  # inside exclude_ips: counted once
            port("e", "router"),
            port("f", "0a:58:0a:09:00:05 10.9.0.5"),  # outside every subnet
        ],
    })  # fmt: skip
    got = subnet_usage(api, PortAddresses().of)
    assert got == [SubnetUsage("10.244.0.0/24", 3, 251), SubnetUsage("10.244.1.0/24", 12, 242)]


def test_cluster_totals_count_uncarved_subnets_as_free() -> None:
    subnets = [SubnetUsage("10.244.0.0/24", 3, 251), SubnetUsage("10.99.0.0/24", 9, 245)]
    assert cluster_usage(subnets, ipaddress.IPv4Network("10.244.0.0/16"), 24) == (3, 256 * 254 - 3)


def test_tunnels_by_bfd_state() -> None:
    def iface(type_: str, bfd: dict[str, str]) -> Any:
        return SimpleNamespace(type=type_, bfd_status=bfd, name="x", external_ids={})

    api = api_with({
        "Interface": [
            iface("geneve", {}), iface("geneve", {"state": "up"}), iface("geneve", {"state": "down"}),
            iface("geneve", {"state": "init"}), iface("", {}), iface("internal", {}),
        ]
    })  # fmt: skip
    ports = OvsPorts.__new__(OvsPorts)
    ports._read = lambda fn: fn(api)  # type: ignore[method-assign]
    assert ports.tunnels() == {"up": 1, "down": 2, "off": 1}
