"""The sandbox step on the daemons' programs: all from the tree, each program's version once;
one from outside the tree (or none found) fails it."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.scenarios import SCENARIOS, ovn_alive, ovn_programs

TREE = Path("/k/build/ovn-trixie")
VERSIONS = {
    "ovn-northd": "25.03.0",
    "ovn-controller": "25.03.0",
    "ovsdb-server": "3.5.0",
    "ovs-vswitchd": "3.5.0",
}


def fake_version(program: Path) -> str:
    return VERSIONS[program.name]


def test_all_from_the_tree_counts_them_and_names_each_programs_version() -> None:
    daemons = [(name, TREE / "bin" / name) for name in ("ovsdb-server", "ovsdb-server", "ovn-northd",
                                                        "ovs-vswitchd", "ovn-controller")]  # fmt: skip
    detail = ovn_programs.summary(daemons, TREE, fake_version)
    assert detail == (
        "5 daemons from build/ovn-trixie; ovn-controller 25.03.0, ovn-northd 25.03.0, "
        "ovs-vswitchd 3.5.0, ovsdb-server 3.5.0"
    )


def test_a_daemon_from_outside_the_tree_fails_the_step() -> None:
    daemons = [
        ("ovn-northd", TREE / "bin/ovn-northd"),
        ("ovs-vswitchd", Path("/usr/lib/openvswitch-switch/ovs-vswitchd")),
    ]
    with pytest.raises(RuntimeError, match=r"ovs-vswitchd runs /usr/lib/openvswitch-switch/ovs-vswitchd"):
        ovn_programs.summary(daemons, TREE, fake_version)
    with pytest.raises(RuntimeError, match="no live OVN/OVS daemon"):
        ovn_programs.summary([], TREE, fake_version)


def test_the_step_runs_right_after_ovn_alive() -> None:
    assert SCENARIOS.index(ovn_programs) == SCENARIOS.index(ovn_alive) + 1
