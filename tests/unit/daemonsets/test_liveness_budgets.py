"""Liveness probes that restart a dead daemon and leave a slow one alone (docs/upgrade.md "Probes").

On 28 Nov the upgrade bench saw node3's openvswitch container killed for `command timed out after
5s` at a load average of 90: its pods had no network for 40 s. A loaded node's exec (podman exec, a
CRI exec) is what is slow there, not ovs-vswitchd. The budgets below, per container:
- the time a single answer may take (timeoutSeconds), against what was measured under load;
- how long a dead daemon stays dead before the kill (failureThreshold x periodSeconds: a dead
  daemon's probe fails at once, its control socket refusing);
- the OVS/OVN clients in an exec probe wait for their daemon less than the exec's own timeout, so a
  hung daemon fails the probe with the client's error instead of a killed exec."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

import pytest

from nodeenv.kubelet.probes import ProbeTracker, run_probe
from tests.unit.daemonsets.rendered import find

Obj = dict[str, Any]
SLOW_EXEC_S = 6.0
"""Longer than the 5 s that killed openvswitch on 28 Nov: a loaded node's healthy probe."""
OVS_DEAD_BOUND_S = 60
"""The bound docs/upgrade.md gives for a dead ovs-vswitchd or ovn-controller to be killed."""
CLIENT = re.compile(r"\b(ovs-appctl|ovn-appctl|ovs-vsctl)\b((?:\s+-[^\s;&|]*)*)")


def _container(kind: str, workload: str, name: str) -> Obj:
    spec = find(kind, workload)["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == name)


def _dead_for(probe: Obj) -> float:
    """Seconds a daemon whose probe fails at once stays dead before kubelet kills the container."""
    return int(probe.get("failureThreshold", 3)) * float(probe.get("periodSeconds", 10))


@pytest.mark.parametrize("name", ["openvswitch", "ovn-controller"])
def test_ovs_node_kills_a_dead_daemon_within_the_bound_and_not_a_slow_exec(name: str) -> None:
    c = _container("DaemonSet", "ovs-node", name)
    live = c["livenessProbe"]
    assert float(live["timeoutSeconds"]) >= 30, f"{name}: a loaded node's exec needs more than {live}"
    assert _dead_for(live) <= OVS_DEAD_BOUND_S, f"{name}: a dead daemon waits {_dead_for(live)} s"
    assert int(live.get("failureThreshold", 3)) >= 5, f"{name}: one slow spell kills it: {live}"
    # start-up is the startup probe's (5 min), not an initialDelay that a slow start outlasts
    start = c["startupProbe"]
    assert "initialDelaySeconds" not in live
    assert _dead_for(start) >= 300 and start["exec"] == live["exec"]


@pytest.mark.parametrize("name", ["openvswitch", "ovn-controller"])
def test_ovs_clients_in_probes_give_up_before_the_exec_does(name: str) -> None:
    c = _container("DaemonSet", "ovs-node", name)
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = c[kind]
        script = " ".join(probe["exec"]["command"])
        clients = CLIENT.findall(script)
        assert clients, f"{name} {kind}: no OVS/OVN client in {script!r}"
        waits = []
        for prog, flags in clients:
            got = re.search(r"--timeout=(\d+)", flags)
            assert got, f"{name} {kind}: {prog} waits forever for a hung daemon: {script!r}"
            waits.append(int(got.group(1)))
        assert sum(waits) < float(probe["timeoutSeconds"]), f"{name} {kind}: {waits} vs {probe}"


@pytest.mark.parametrize(
    ("kind", "workload", "name"),
    [
        ("Deployment", "flashdns-controller", "flashdns-controller"),
        ("DaemonSet", "prismnet-agent", "prismnet-agent"),
        ("DaemonSet", "iam-webhook", "iam-webhook"),
    ],
)
def test_http_liveness_waits_more_than_kubelets_default_second(kind: str, workload: str, name: str) -> None:
    c = _container(kind, workload, name)
    assert float(c["livenessProbe"].get("timeoutSeconds", 1)) >= 5, c["livenessProbe"]
    assert float(c["readinessProbe"].get("timeoutSeconds", 1)) >= 3, c["readinessProbe"]


def test_cluster_dns_liveness_is_coredns_tolerance() -> None:
    """flashdns is the cluster DNS: 5 failures of 5 s each before a kill, as CoreDNS's /health."""
    live = _container("Deployment", "flashdns-controller", "flashdns-controller")["livenessProbe"]
    assert int(live.get("failureThreshold", 3)) >= 5 and float(live["timeoutSeconds"]) >= 5


def test_a_probe_answering_in_6_s_passes_openvswitchs_liveness() -> None:
    """The runner's prober (as kubelet's) with openvswitch's liveness probe and a command answering in
    6 s: a success (the probe of 28 Nov, 5 s, failed it: three such failures killed it)."""
    live = _container("DaemonSet", "ovs-node", "openvswitch")["livenessProbe"]

    def slow(cmd: list[str], timeout: float) -> tuple[int, str]:
        p = subprocess.run(["sleep", str(SLOW_EXEC_S)], timeout=timeout, capture_output=True, text=True)
        return p.returncode, p.stdout

    tracker = ProbeTracker("livenessProbe", live, started=0.0)
    t = time.monotonic()
    ok, reason = run_probe(live, {}, "", slow)
    assert ok and reason == "", reason
    assert time.monotonic() - t >= SLOW_EXEC_S
    assert tracker.record(time.monotonic(), ok, reason) is True
    # four failures in a row (the fifth answering) do not reach the kill
    for _ in range(int(live["failureThreshold"]) - 1):
        assert tracker.record(time.monotonic(), False, "command timed out after 30s") is None
    assert tracker.record(time.monotonic(), True, "") is None and tracker.result is True
