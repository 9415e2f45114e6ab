"""The newcomer's path as commands (`make boot`, `make boot-status`, `make boot-down`, i.e.
`python -m nodeenv.kubelet boot|status|down`), end to end: the API double, the whole k3s overlay
applied with kubectl, every workload booted from the image by the detached runner, the pods table
with Ready counts; then everything removed (processes, containers, links, mounts, the run dir).

It boots the node's OVS from the image like test_boot_node_network.py (one userspace datapath per
machine): marked `own_ovs`, run before the session's OVN node under both locks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nodeenv.image.store import ImageStore
from nodeenv.kubelet.runner import RUNNER_LABEL
from nodeenv.ovn_stack import USERSPACE_DATAPATH_DEV
from tests.conftest import require_ovn
from tests.integration.kubelet.boot_session import cli
from tests.integration.kubelet.conftest import wait_for

pytestmark = pytest.mark.own_ovs

OURS_READY = ("ovn-central", "ovs-node", "prismnet-agent", "iam-webhook", "fiberlb-controller",
              "netpol-controller", "node-controller", "flashdns-controller",
              "project-controller", "lightningstor-csi-controller", "lightningstor-csi-node")  # fmt: skip
"""The overlay's workloads (the CSI pods' sidecars stood in for by the runner, their backend the
LightningStor VolumeService boot starts)."""


def _links() -> set[str]:
    return {p.name for p in Path("/sys/class/net").iterdir()}


def rows(table: str) -> dict[str, list[str]]:
    """`kubectl get pods -A -o wide` rows by pod name: [namespace, name, ready, status, ...]."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["NAMESPACE", "NAME", "READY"])
    out = {}
    for line in lines[start + 1 :]:
        cols = line.split()
        if len(cols) < 8 or "/" not in cols[2]:
            break
        out[cols[1]] = cols
    return out


def test_boot_status_and_down_from_the_command_line(short_tmp: Path) -> None:
    require_ovn()
    if Path(f"/sys/class/net/{USERSPACE_DATAPATH_DEV}").exists():
        pytest.fail(f"{USERSPACE_DATAPATH_DEV} exists: another ovs-vswitchd holds the userspace datapath")
    run_dir = short_tmp / "boot"
    flags = ("--run-dir", str(run_dir))
    links_before = _links()
    try:
        booted = cli("boot", *flags, "--nodes", "1", "--api-port", "0", "--timeout", "300", timeout=420)
        out = booted.stdout
        assert booted.returncode == 0, f"boot exited {booted.returncode}:\n{out}\n{booted.stderr}"
        pods = rows(out)
        for app in OURS_READY:
            mine = [cols for name, cols in pods.items() if name.startswith(app + "-")]
            running = [c for c in mine if c[3] == "Running" and len(set(c[2].split("/"))) == 1]
            # the rest: a host-network Deployment's second replica, Pending on one node (host ports)
            assert running and all(c in running or c[3] == "Pending" for c in mine), f"{app}:\n{out}"
        assert "Ready: " in out and "with containers not booted" not in out, out
        assert re.search(r"^Prometheus: (\d+)/\1 targets up; curl http://127\.0\.0\.1:", out, re.M), out
        flashdns = next(cols for name, cols in pods.items() if name.startswith("flashdns-controller-"))
        assert flashdns[6].startswith("10.244."), flashdns  # a PrismNET address from the booted CNI
        # a ClusterFirst pod resolves a Service's short name through kubelet's search path, at the
        # cluster DNS Service's ClusterIP (fiberlb's OVN load balancer to flashdns-controller's pod)
        store = ImageStore.from_env({})
        names = store("ps", "--format", "{{.Names}}").split()
        project = next(n for n in names if n.startswith("k8s_project-controller_"))
        lookup = "import socket; print(socket.gethostbyname('cluster-dns.kube-system'))"

        def resolved() -> str:
            return store("exec", project, "python3", "-c", lookup, check=False)

        # the Service's slice and fiberlb's load balancer follow flashdns's readiness within a sync or two
        wait_for(
            lambda: resolved() == "10.96.0.10", 20, "cluster-dns.kube-system resolved in a pod", resolved
        )
        status = cli("status", *flags)
        assert status.returncode == 0 and set(rows(status.stdout)) == set(pods), status.stdout + status.stderr
        again = cli("boot", *flags)
        assert again.returncode == 1 and "already booted" in again.stderr, again.stderr
    finally:
        down = cli("down", *flags, timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not run_dir.exists()
    left = sorted(_links() - links_before)
    assert not left, f"boot-down left links behind: {left}"
    store = ImageStore.from_env({})
    containers = store("ps", "-a", "--filter", f"label={RUNNER_LABEL}", "--format", "{{.Names}}")
    assert containers == "", f"boot-down left containers: {containers}"
