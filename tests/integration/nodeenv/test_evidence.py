"""A node environment that finds a daemon wedged or dead names it and keeps the evidence (issue 20).

The throwaway environment is ovsdb-server + ovs-vswitchd started by the node environment's own code
(nodeenv.ovn_stack), without a bridge: a bridge on the userspace datapath would claim the machine's
one `ovs-netdev` device, which the session's OVN node holds.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv import evidence
from nodeenv.daemons import is_alive
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_stack import rundirs, start_ovsdb, start_vswitchd
from nodeenv.vswitchd import choose_vswitchd
from tests.conftest import require_ovn

pytestmark = pytest.mark.root


class VswitchdOnly:
    name = "vswitchd-only"

    def start(self, node: Node) -> dict[str, str]:
        env = {**node.process_env(), **rundirs(node.path("ovs", "x").parent)}
        chosen = choose_vswitchd()  # the one the node environment runs, started the same way
        return {"OVS_DB": start_ovsdb(node, "ovs", chosen.schema, env), **start_vswitchd(node, env, chosen)}

    def cleanup(self, node: Node) -> None:
        pass


@pytest.fixture
def throwaway(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    require_ovn()
    monkeypatch.setattr(evidence, "EVIDENCE_ROOT", short_tmp / "evidence")
    monkeypatch.setattr(evidence, "PROBE_TIMEOUT", 1)
    node = Node(NodeSettings(run_dir=short_tmp / "throwaway" / "run", bridge="br-unused"), [VswitchdOnly()])
    node.up()
    try:
        yield node
    finally:
        node.down()


def vswitchd(node: Node) -> int:
    (rec,) = [r for r in node.daemons.load() if r.name == "ovs-vswitchd"]
    return rec.pid


def test_a_wedged_then_crashed_vswitchd_is_named_and_its_evidence_kept(throwaway: Node) -> None:
    assert throwaway.check() == [] and throwaway.evidence is None
    pid = vswitchd(throwaway)
    assert Path(f"/proc/{pid}/cwd").resolve() == (throwaway.run_dir / "ovs").resolve()  # where its core goes
    assert (
        "unlimited" in Path(f"/proc/{pid}/limits").read_text().split("Max core file size")[1].split("\n")[0]
    )

    os.kill(pid, signal.SIGSTOP)  # wedged: alive, no answer
    try:
        (fault,) = throwaway.check()
    finally:
        os.kill(pid, signal.SIGCONT)
    assert (fault.daemon, fault.state) == ("ovs-vswitchd", "wedged") and "no answer" in fault.detail
    kept = throwaway.evidence
    assert kept is not None and kept.parent == evidence.EVIDENCE_ROOT
    assert "ovs-vswitchd" in (kept / "FAULTS.txt").read_text()
    assert (kept / "logs" / "ovs" / "ovs-vswitchd.log").exists()
    assert "cells:" in (kept / "ovsdb-server-ovs.memory_show.txt").read_text()  # live daemons' state too

    os.kill(pid, signal.SIGSEGV)
    deadline = time.monotonic() + 30
    while any(is_alive(r) for r in throwaway.daemons.load() if r.name == "ovs-vswitchd"):
        assert time.monotonic() < deadline, "ovs-vswitchd survived SIGSEGV"
        time.sleep(0.05)
    throwaway.down()  # finds it dead, keeps the evidence again (same place), then stops the rest

    assert [(f.daemon, f.state) for f in throwaway.faults] == [("ovs-vswitchd", "dead")]
    assert throwaway.evidence == kept
    faults_txt = (kept / "FAULTS.txt").read_text()
    assert f"ovs-vswitchd (pid {pid}) dead" in faults_txt
    pattern = evidence.CORE_PATTERN.read_text().strip()
    assert not pattern.startswith(("|", "/")), (
        f"kernel.core_pattern {pattern!r} sends cores elsewhere; this test checks the backtrace of a "
        "core in the run dir (the machine's default 'core')"
    )
    (bt,) = kept.glob("core*.backtrace.txt")
    assert f"backtrace in {bt}" in faults_txt
    text = bt.read_text()
    assert "#0 " in text and "Thread" in text, text[-2000:]
    (note,) = kept.glob("core*.note")  # gdb was given the daemon's binary, however long its path
    assert note.read_text().split("core of ")[1].split(";")[0].endswith("/ovs-vswitchd"), note.read_text()
    assert not (throwaway.run_dir).exists()  # down() still removed the run dir
