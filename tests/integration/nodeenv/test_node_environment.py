from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nodeenv.daemons import DaemonError, is_alive
from nodeenv.node import Node, NodeSettings, read_env_file
from nodeenv.ovn_stack import OvnStack
from nodeenv.scenario import Scenario
from nodeenv.scenarios import ovn_alive

OVN_DAEMONS = {
    "ovsdb-server-ovs",
    "ovsdb-server-nb",
    "ovsdb-server-sb",
    "ovs-vswitchd",
    "ovn-northd",
    "ovn-controller",
}


def test_node_env_file_names_every_endpoint(ovn_node: Node) -> None:
    env = read_env_file(ovn_node.env_file)
    for key in ("OVS_DB", "OVN_NB_DB", "OVN_SB_DB", "OVS_BRIDGE"):
        assert env[key], key
    out = subprocess.run(["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "show"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_two_namespaces_ping_through_an_ovn_switch(ovn_node: Node) -> None:
    scn = Scenario(ovn_node)
    try:
        ovn_alive.run(scn)
    finally:
        assert scn.run_cleanups() == []
    assert [r.ok for r in scn.results] == [True, True, True]
    assert not [
        ns
        for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        if ns.startswith("sbx-ovn")
    ]


def test_up_again_is_harmless(ovn_node: Node) -> None:
    records = ovn_node.daemons.load()  # other tests may have added their daemons to this node
    assert {r.name for r in records} >= OVN_DAEMONS
    assert all(is_alive(r) for r in records)
    assert Path(f"/sys/class/net/{ovn_node.settings.bridge}").exists()
    again = Node(ovn_node.settings, [OvnStack()])
    assert again.up() == read_env_file(ovn_node.env_file)
    assert [r.pid for r in again.daemons.load()] == [r.pid for r in records]


def test_second_environment_on_one_machine_is_refused_clearly(ovn_node: Node, short_tmp: Path) -> None:
    other = Node(NodeSettings(run_dir=short_tmp / "other", bridge="br-k8sother"), [OvnStack()])
    try:
        with pytest.raises(DaemonError, match="only one can"):
            other.up()
    finally:  # had it come up (the session's ovs-vswitchd gone), it must not outlive the test
        if other.is_up():
            other.down()
    assert not other.run_dir.exists(), "a refused node-up must leave nothing behind"
    assert all(is_alive(r) for r in ovn_node.daemons.load()), "the running environment was disturbed"
