from __future__ import annotations

import os
import subprocess
from pathlib import Path

from nodeenv.daemons import is_alive
from nodeenv.node import Node, NodeSettings, read_env_file
from nodeenv.ovn_stack import OvnStack
from nodeenv.scenario import Scenario
from nodeenv.scenarios import ovn_alive
from tests.conftest import require_ovn


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


def test_up_twice_is_harmless_and_down_leaves_nothing(short_tmp: Path) -> None:
    require_ovn()
    settings = NodeSettings(run_dir=short_tmp / "updown", bridge=f"br-u{os.getpid()}", system_id="updown")
    node = Node(settings, [OvnStack()])
    first = node.up()
    records = node.daemons.load()
    assert len(records) == 6 and all(is_alive(r) for r in records)
    assert Node(settings, [OvnStack()]).up() == first  # a second up changes nothing
    assert [r.pid for r in node.daemons.load()] == [r.pid for r in records]
    node.down()
    assert not any(is_alive(r) for r in records)
    assert not Path(f"/sys/class/net/{settings.bridge}").exists()
    assert not settings.run_dir.exists()
