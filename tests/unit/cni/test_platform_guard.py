"""The platform guard's settings and match (cni/platform_ports.py, cni/platform_guard.py); the guard
in OVN and its traffic are tests/integration/cluster/test_tenant_isolation.py."""

from __future__ import annotations

import pytest

from cni.platform_guard import guard_match, host_set_name, remote_hosts
from cni.platform_ports import PLATFORM_PORTS, PortRange, parse_ports
from cni.settings import AgentSettings, build_parser


def test_ports_parse_into_ranges_and_one_match() -> None:
    ports = parse_ports("tcp:6641, tcp:6640-6644,udp:6081")
    assert ports == (PortRange("tcp", 6641, 6641), PortRange("tcp", 6640, 6644), PortRange("udp", 6081, 6081))
    assert guard_match("pn_host_x", ports) == (
        "ip4.dst == $pn_host_x && "
        "(tcp.dst == 6641 || (tcp.dst >= 6640 && tcp.dst <= 6644) || udp.dst == 6081)"
    )
    assert parse_ports("") == ()


def test_default_guards_the_ovsdb_and_tunnel_ports_and_never_an_ephemeral_one() -> None:
    ports = parse_ports(PLATFORM_PORTS)
    for proto, port in (("tcp", 6640), ("tcp", 6641), ("tcp", 6642), ("tcp", 6643), ("tcp", 6644),
                        ("tcp", 7641), ("tcp", 8642), ("udp", 6081), ("udp", 4789)):  # fmt: skip
        assert any(p.protocol == proto and p.first <= port <= p.last for p in ports), (proto, port)
    for proto in ("tcp", "udp"):  # nor DNS or the API, which pods must reach
        assert not any(p.protocol == proto and p.first <= 53 <= p.last for p in ports)
    assert not any(p.first <= 6443 <= p.last for p in ports)
    assert all(p.last < 32768 for p in ports), "replies to the node's own connections would be dropped"


@pytest.mark.parametrize("text", ["tcp", "tcp:", "sctp:80", "tcp:0", "tcp:70000", "tcp:9-8", "tcp:a-b"])
def test_malformed_ports_are_refused_naming_the_entry(text: str) -> None:
    with pytest.raises(ValueError, match="platform port"):
        parse_ports(f"tcp:6641,{text}")


@pytest.mark.parametrize("argv", [["--platform-ports", "tcp:x"], ["--platform-addresses", "10.0.0.300"]])
def test_invalid_guard_settings_exit_with_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        AgentSettings.from_argv(argv, {})
    assert e.value.code == 2


def test_guard_settings_from_env_and_help() -> None:
    env = {"PRISMNET_PLATFORM_PORTS": "tcp:6641", "PRISMNET_PLATFORM_ADDRESSES": "192.0.2.1"}
    s = AgentSettings.from_argv([], env)
    assert (s.platform_ports, s.platform_addresses) == ("tcp:6641", "192.0.2.1")
    assert AgentSettings.from_argv([], {}).platform_ports == PLATFORM_PORTS
    helptext = build_parser({}).format_help()
    assert "PRISMNET_PLATFORM_PORTS" in helptext and "PRISMNET_PLATFORM_ADDRESSES" in helptext


def test_central_addresses_come_from_the_remotes() -> None:
    remotes = (
        "tcp:10.250.0.1:6641,ssl:10.250.0.2:7641,unix:/run/nb.sock,tcp:[fd00::1]:6641,ssl:ovn.example:6641"
    )
    assert remote_hosts(remotes) == ["10.250.0.1", "10.250.0.2"]


def test_set_names_are_ovn_identifiers_per_node() -> None:
    names = {host_set_name(n) for n in ("node1", "node-2.example.com", "node1 ")}
    assert len(names) == 3 and all(n.startswith("pn_host_") and n.replace("_", "").isalnum() for n in names)
