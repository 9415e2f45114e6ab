"""OVN central as RAFT clusters (nodeenv/ovn_central.py, mode "raft"): 3-member NB and SB, two
ovn-northd; an NB leader killed during writes through ovnaccess loses nothing, an SB leader killed
and the active northd killed are taken over. The central alone (no ovs-vswitchd): it needs no
userspace datapath and runs beside the session's `ovn_node`."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_central import OvnCentral, cluster_status, northd_status
from ovnaccess.connection import connect
from ovnaccess.remotes import parse_remotes
from tests.conftest import require_ovn

Central = tuple[Node, OvnCentral]
DB_NAMES = {"nb": "OVN_Northbound", "sb": "OVN_Southbound"}


@pytest.fixture(scope="module")
def raft(short_tmp: Path) -> Iterator[Central]:
    require_ovn()
    central = OvnCentral("raft")
    node = Node(NodeSettings(run_dir=short_tmp / "raft", install_root=short_tmp / "raft-root"), [central])
    node.up()
    try:
        yield node, central
    finally:
        node.down()


def eventually(check: Callable[[], object], what: str, timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def ctl(node: Node, db: str, *args: str) -> str:
    """ovn-nbctl / ovn-sbctl with the whole remote list, as every client gets it."""
    argv = [f"ovn-{db}ctl", f"--db={node.endpoints[f'OVN_{db.upper()}_DB']}", "--timeout=10", *args]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def kill(node: Node, daemon: str) -> None:
    rec = next(r for r in node.daemons.load() if r.name == daemon)
    os.kill(rec.pid, signal.SIGKILL)


def datapaths(node: Node) -> set[str]:
    """Switch names in the SB (empty while the SB elects: ovn-sbctl with a list tries each member
    once and fails when none leads, as the issue says)."""
    argv = ["ovn-sbctl", f"--db={node.endpoints['OVN_SB_DB']}", "--bare", "--columns=external_ids",
            "list", "Datapath_Binding"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    return {w.removeprefix("name=") for w in out.split() if w.startswith("name=")}


def test_each_database_is_a_three_member_cluster_and_clients_get_every_member(raft: Central) -> None:
    node, central = raft
    for key, name in DB_NAMES.items():
        status = [cluster_status(central.member(node, key, i).ctl, name) for i in (1, 2, 3)]
        assert [s.get("Status") for s in status] == ["cluster member"] * 3, status
        assert sorted(s.get("Role", "") for s in status) == ["follower", "follower", "leader"], status
        remotes = parse_remotes(node.endpoints[f"OVN_{key.upper()}_DB"])
        assert remotes == tuple(f"unix:{central.member(node, key, i).socket}" for i in (1, 2, 3))
    northds = sorted(northd_status(c) for c in central.northd_ctls(node).values())
    assert northds == ["active", "standby"]
    ctl(node, "nb", "ls-add", "raft-probe")
    eventually(lambda: "raft-probe" in datapaths(node), "northd to translate a switch")


def test_nb_leader_killed_during_writes_loses_nothing(
    raft: Central, caplog: pytest.LogCaptureFixture
) -> None:
    node, central = raft
    caplog.set_level(logging.INFO, logger="ovnaccess")
    db = connect(node.endpoints["OVN_NB_DB"], "OVN_Northbound", {"Logical_Switch": None}, timeout=5)
    leader = central.leader(node, "nb")
    assert leader is not None
    names = [f"raft-w{i:02d}" for i in range(40)]
    committed: list[float] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for name in names:
                db.api.ls_add(name, may_exist=True).execute(check_error=True)
                committed.append(time.monotonic())
        except BaseException as e:
            errors.append(e)

    writer = threading.Thread(target=write)
    try:
        writer.start()
        eventually(lambda: len(committed) >= 10, "the first writes")
        killed_at = time.monotonic()
        kill(node, leader.daemon)
        writer.join(60)
        assert errors == [] and len(committed) == len(names)
        after = [t for t in committed if t > killed_at]
        print(f"\nNB leader killed: next write committed after {after[0] - killed_at:.2f}s")
        new = eventually(lambda: central.leader(node, "nb"), "a new NB leader")
        assert new != leader
        listed = ctl(node, "nb", "--bare", "--columns=name", "list", "Logical_Switch").split()
        assert sorted(n for n in listed if n.startswith("raft-w")) == names  # each exactly once
        said = [r for r in caplog.records if r.name == "ovnaccess.retry" and r.levelno == logging.WARNING]
        assert said, "the writer did not log losing the leader"
    finally:
        db.stop()
        central.restart_member(node, "nb", leader.index)
    m = central.member(node, "nb", leader.index)
    eventually(lambda: cluster_status(m.ctl, m.db.name).get("Role") == "follower", "the old leader to rejoin")


def test_sb_leader_killed_northd_keeps_translating(raft: Central) -> None:
    node, central = raft
    leader = central.leader(node, "sb")
    assert leader is not None
    kill(node, leader.daemon)
    try:
        started = time.monotonic()
        ctl(node, "nb", "ls-add", "after-sb-kill")
        eventually(lambda: "after-sb-kill" in datapaths(node), "northd to write the new SB leader")
        print(f"\nSB leader killed: datapath in SB after {time.monotonic() - started:.2f}s")
    finally:
        central.restart_member(node, "sb", leader.index)


def test_active_northd_killed_the_standby_takes_over(raft: Central) -> None:
    node, central = raft
    ctls = central.northd_ctls(node)

    def states() -> dict[str, str]:
        return {n: northd_status(c) for n, c in ctls.items()}

    eventually(lambda: "active" in states().values(), "an active northd")
    now = states()
    assert sorted(now.values()) == ["active", "standby"], now
    active = next(n for n, st in now.items() if st == "active")
    standby = next(name for name in ctls if name != active)
    kill(node, active)
    started = time.monotonic()
    eventually(lambda: northd_status(ctls[standby]) == "active", "the standby northd to become active")
    took = time.monotonic() - started
    ctl(node, "nb", "ls-add", "after-northd-kill")
    eventually(lambda: "after-northd-kill" in datapaths(node), "the new active northd to translate")
    print(f"\nactive northd killed: standby active after {took:.2f}s")
