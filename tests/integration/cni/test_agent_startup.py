"""prismnet-agent started before the node's OVS (as a DaemonSet is, beside ovs-node): it waits
instead of exiting, /healthz answers, /readyz says what it waits for and the log names it; each
database or object appearing moves it to the next step; SIGTERM while waiting exits 0.

Private ovsdb-servers on unix sockets in a temp dir, no ovs-vswitchd: nothing of the machine's
network is touched (the management port is the last step, and no device ever appears for it)."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.daemons import free_port
from tests.waiting import eventually

SCHEMAS = {
    "ovs": Path("/usr/share/openvswitch/vswitch.ovsschema"),
    "nb": Path("/usr/share/ovn/ovn-nb.ovsschema"),
}


MGMT = "pnm-startup"
"""A management port name no node environment uses: no device of that name ever appears."""


def get(url: str) -> tuple[int, str]:
    """(status, body); (0, the error) while nothing listens. No proxy: the agent is on loopback."""
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


class Servers:
    """ovsdb-servers for the schemas, started on demand; their sockets exist up front as paths."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.procs = tmp, list[subprocess.Popen[bytes]]()
        self.sock = {name: tmp / f"agent-{name}.sock" for name in SCHEMAS}

    def start(self, name: str) -> None:
        missing = [str(p) for p in SCHEMAS.values() if not p.exists()]
        if missing:
            pytest.fail(f"OVS/OVN schemas missing ({', '.join(missing)}): run `make setup`")
        db = self.tmp / f"agent-{name}.db"
        subprocess.run(["ovsdb-tool", "create", str(db), str(SCHEMAS[name])], check=True)
        ctl = self.tmp / f"agent-{name}.ctl"
        argv = ["ovsdb-server", f"--remote=punix:{self.sock[name]}", f"--unixctl={ctl}", str(db)]
        self.procs.append(subprocess.Popen(argv, stderr=subprocess.DEVNULL))
        eventually(self.sock[name].exists, lambda: f"{name} ovsdb-server's socket")

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
            p.wait(10)


@pytest.fixture
def servers(short_tmp: Path) -> Iterator[Servers]:
    s = Servers(short_tmp)
    yield s
    s.stop()


def test_agent_waits_for_ovs_then_ovn_then_the_bridge(servers: Servers, short_tmp: Path) -> None:
    port, log = free_port(), short_tmp / "agent.log"
    argv = [sys.executable, "-m", "cni.daemon.main", "--ovs-db", f"unix:{servers.sock['ovs']}",
            "--ovn-nb-db", f"unix:{servers.sock['nb']}", "--socket", str(short_tmp / "agent-cni/cni.sock"),
            "--metrics-address", f"127.0.0.1:{port}", "--node-name", "node-w",
            "--management-interface", MGMT]  # fmt: skip
    with log.open("wb") as out:
        agent = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    ready = f"http://127.0.0.1:{port}/readyz"

    def then(step: str) -> None:
        want = f"not ready: waiting for {step}"
        seen = lambda: f"/readyz saying {want!r}, got {get(ready)}; log: {log.read_text()[-800:]}"  # noqa: E731
        eventually(lambda: (r := get(ready))[0] == 503 and want in r[1], seen)
        assert agent.poll() is None, log.read_text()
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        assert f"waiting for {step}" in log.read_text()

    try:
        then(f"the local OVS (Open_vSwitch at unix:{servers.sock['ovs']})")
        servers.start("ovs")
        then(f"OVN Northbound at unix:{servers.sock['nb']}")
        servers.start("nb")
        then("the integration bridge br-int: no bridge br-int in the local OVS yet")
        vsctl = ["ovs-vsctl", "--no-wait", f"--db=unix:{servers.sock['ovs']}"]
        subprocess.run([*vsctl, "add-br", "br-int"], check=True)
        then(f"the management port {MGMT}")  # no ovs-vswitchd here: its device never appears
        agent.terminate()
        assert agent.wait(30) == 0, log.read_text()
        assert "stopped before the node's OVS/OVN was ready" in log.read_text()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
