"""The runner's shutdown removes everything it started even when a step of it fails: a pod on the
pod network (PrismNET, the session's OVN node) whose stand-in sidecar ignores SIGTERM and whose
podman removal times out. After the shutdown, which raises that timeout once the rest is cleaned,
the stand-in's PID is gone, the pod's netns is gone and nothing is mounted under the runner's dir
(last session's test_boot_storage teardown left all three behind)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet import rootdir
from nodeenv.kubelet import runner as runner_module
from nodeenv.kubelet.sandbox import node_cni
from nodeenv.kubelet.sidecars import STAND_INS
from tests.cni_agent_fixture import Agent
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubelet.conftest import start_runner, wait_for
from tests.integration.kubelet.pod_network import api_on_management_port
from tests.kubeapi_fixture import KubeApiHandle

STUBBORN = "k8shost.test/stubborn-sidecar"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "stubborn", "namespace": "default"},
    "spec": {
        "automountServiceAccountToken": False,
        "containers": [{"name": "sidecar", "image": f"{STUBBORN}:1"}],
    },
}


@pytest.fixture
def kube_api(agent: Agent, tmp_path: Path, kube_api_config: ApiConfig) -> Iterator[KubeApiHandle]:
    with api_on_management_port(agent, tmp_path, kube_api_config) as api:
        yield api


def _netns() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True).stdout
    return [n["name"] for n in json.loads(out or "[]")]


def test_a_failing_teardown_step_leaves_nothing_behind(
    kube_api: KubeApiHandle, agent: Agent, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(STAND_INS, STUBBORN, "tests.integration.kubelet.stubborn_sidecar")
    monkeypatch.setattr(runner_module, "STANDIN_GRACE", 1.0)
    root = short_tmp / "teardown"
    runner, halt = start_runner(kube_api, root, cni=node_cni(agent.env), sandbox_retry=1.0)
    try:
        kubectl(kube_api, "apply", "-f", "-", stdin=json.dumps(POD))

        def started() -> Any:
            rts = [rt for rt in runner.pods.values() if rt.standins and rt.sandbox is not None]
            return rts[0] if rts else None

        rt = wait_for(started, 45, "the stubborn stand-in running in the pod's netns")
        pid, netns = rt.standins["sidecar"].pid, rt.sandbox.netns_name
        assert netns in _netns() and Path(f"/proc/{pid}").exists()
        real = runner.podman

        def podman(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
            if args[:1] == ("rm",):  # a podman that hangs on the removal
                raise subprocess.TimeoutExpired(["podman", *args], 120)
            return real(*args, **kw)

        monkeypatch.setattr(runner, "podman", podman)
    except BaseException:
        halt()
        raise
    with pytest.raises(subprocess.TimeoutExpired):
        halt()
    assert not Path(f"/proc/{pid}").exists(), f"stand-in pid {pid} left running"
    assert netns not in _netns(), f"netns {netns} left"
    assert rootdir.mounts_under(root) == [] and not rootdir._is_mount_point(root / "host" / "var/lib/kubelet")
