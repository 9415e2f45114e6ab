"""The environment from a checkout 120 characters deep (issue 30: a newcomer's clone in an ordinary
place, `/home/alice/src/github.com/plasmacloud/k8shost`, made `make sandbox` refuse and cluster-up
fail at gRPC's bind): this checkout bind-mounted at such a path, and from there, by the checkout's
own Python as `make` runs it, `make sandbox NODES=1`'s command (the scenario on the single-node
environment) and a 3-node `cluster-up`, `cluster-status`, `cluster-down`, each with its run dir
inside that checkout.

The single-node environment's install root (the machine's `/` by default) is a short directory of
the test's, as in the other node tests: this test is about the checkout's depth.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from nodeenv.cluster.underlay import list_netns
from protos import pluginregistration_pb2, pluginregistration_pb2_grpc
from tests.conftest import require_ovn

REPO = Path(__file__).resolve().parents[3]
DEPTH = 120
PREFIX = "k8shd"
SUN_PATH_MAX = 107
REGISTRATION = "root/var/lib/kubelet/plugins_registry/stor.plasmacloud.io-reg.sock"
pytestmark = pytest.mark.own_ovs  # the single-node environment's ovs-vswitchd: before the session's node


@pytest.fixture
def deep_checkout() -> Iterator[Path]:
    """This checkout bind-mounted at a path of DEPTH characters; unmounted and its directories
    removed after (only empty ones: never a tree that may still be the checkout)."""
    require_ovn()
    base = Path(tempfile.mkdtemp(prefix="k8sh-deep-", dir="/tmp"))
    home = base / "home/alice/src/github.com/plasmacloud"
    path = home / ("p" * max(1, DEPTH - len(str(home)) - len("/k8shost") - 1)) / "k8shost"
    path.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(REPO), str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
        for d in (path, *path.parents):
            if d == base.parent:
                break
            d.rmdir()  # fails on anything not empty


def _run(checkout: Path, *args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`make`'s command line run from `checkout`: its own .venv's Python, in it."""
    py = checkout / ".venv/bin/python"
    t0 = time.monotonic()
    proc = subprocess.run([str(py), "-m", "nodeenv.cli", *args], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    print(f"\n{' '.join(args)}: rc {proc.returncode} in {time.monotonic() - t0:.1f} s\n{proc.stdout[-3000:]}")
    return proc


def test_sandbox_on_one_node_and_a_three_node_cluster_from_a_deep_checkout(
    deep_checkout: Path, short_tmp: Path
) -> None:
    assert len(str(deep_checkout)) >= DEPTH
    env = {**os.environ, "K8SHOST_INSTALL_ROOT": str(short_tmp / "deep-root"), "K8SHOST_BRIDGE": "br-k8sdeep",
           "K8SHOST_SYSTEM_ID": "k8shost-deep"}  # fmt: skip
    run_dir = deep_checkout / f".run-deep-{os.getpid()}"
    sandbox = _run(deep_checkout, "sandbox", "--nodes", "1", "--run-dir", str(run_dir), env=env, timeout=600)
    assert sandbox.returncode == 0, sandbox.stdout[-3000:] + sandbox.stderr[-3000:]
    assert "sandbox (one node): PASSED" in sandbox.stdout
    assert not run_dir.exists()

    cluster_dir = deep_checkout / f".run-deep-cluster-{os.getpid()}"
    flags = ("--nodes", "3", "--cluster-dir", str(cluster_dir), "--prefix", PREFIX)
    try:
        up = _run(deep_checkout, "cluster-up", *flags, env=env, timeout=600)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        status = _run(deep_checkout, "cluster-status", *flags, env=env, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        deepest = cluster_dir / "nodes/node3" / REGISTRATION
        assert len(str(deepest)) > SUN_PATH_MAX and deepest.is_socket()  # in the checkout, too long to bind
        info = _registration_info(deepest)
        assert info.name == "stor.plasmacloud.io" and info.endpoint.endswith("/csi.sock")
    finally:
        down = _run(deep_checkout, "cluster-down", *flags, env=env, timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not cluster_dir.exists() and list_netns(PREFIX) == []


def _registration_info(sock: Path) -> pluginregistration_pb2.PluginInfo:
    """kubelet's GetInfo on a registration socket whose own path is too long to connect to: by a
    short path to it through its directory (opened: /proc/self/fd/<fd>/<name>)."""
    fd = os.open(sock.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with grpc.insecure_channel(f"unix:///proc/self/fd/{fd}/{sock.name}") as ch:
            stub = pluginregistration_pb2_grpc.RegistrationStub(ch)
            return stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=10)
    finally:
        os.close(fd)
