"""LightningStor CSI from the image: the runner boots the overlay's lightningstor-csi-controller and
lightningstor-csi-node pods on the session's OVN node (PrismNET pod network), their
`lightningstor-csi` containers Ready through their own probes (the liveness-probe sidecar's
/healthz, served in its place by the runner: nodeenv/kubelet/livenessprobe.py). The overlay's backend
is PlasmaCloud's VolumeService (`CSI_BACKEND: lightningstor`), here the faithful gRPC fake
(nodeenv/lightningstor_double.py, real loop devices) on the node's management address,
which the pods reach over PrismNET. The sidecars' and kubelet's calls (csi_callers.py) then serve a
volume of the overlay's StorageClass to a pod path, a podman container writes to it, the data
survives unpublish/unstage/restage/republish, and deleting it leaves no loop device or mount."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from csi.settings import DRIVER_NAME
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.rootdir import mounts_under
from nodeenv.kubelet.sandbox import node_cni
from nodeenv.lightningstor_double import serve
from tests.cni_agent_fixture import Agent
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubelet import csi_callers as csi
from tests.integration.kubelet.conftest import NS, pods, wait_for
from tests.integration.kubelet.pod_network import api_on_management_port, keep_only, management_ip
from tests.kubeapi_fixture import KubeApiHandle

IMAGE = "registry.plasmacloud.io/k8shost:0.1.0"
CSI_PODS = ("lightningstor-csi-controller", "lightningstor-csi-node")


@pytest.fixture
def kube_api(agent: Agent, tmp_path: Path, kube_api_config: ApiConfig) -> Iterator[KubeApiHandle]:
    with api_on_management_port(agent, tmp_path, kube_api_config) as api:
        yield api


def _statuses(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in p.get("status", {}).get("containerStatuses") or []}


def _in_pod(runner: Any, volume: Path, script: str) -> str:
    """A container of the image with the volume's pod path mounted at /data, as kubelet mounts it."""
    mount = f"type=bind,source={volume},destination=/data"
    proc = runner.podman("run", "--rm", "--pull=never", "--network=none", "--mount", mount, IMAGE,
                         "sh", "-ec", script)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: str = proc.stdout
    return out


def _loops_of(root: Path) -> list[str]:
    out = subprocess.run(["losetup", "-J", "-l"], capture_output=True, text=True).stdout
    return [d["name"] for d in json.loads(out or '{"loopdevices": []}')["loopdevices"]
            if (d.get("back-file") or "").startswith(f"{root}/")]  # fmt: skip


def test_csi_plugins_from_the_image_serve_a_volume_to_a_pod_path(
    kube_api: KubeApiHandle, applied: Path, runner_factory: Any, agent: Agent, short_tmp: Path
) -> None:
    keep_only(
        kube_api, ("deployment.apps/lightningstor-csi-controller", "daemonset.apps/lightningstor-csi-node")
    )
    ls_root = short_tmp / f"ls-{uuid.uuid4().hex[:6]}"
    server, service, endpoint = serve(ls_root, nodes=["node-1"], host=management_ip(agent))
    try:
        patch = json.dumps({"data": {"LIGHTNINGSTOR_ENDPOINT": endpoint}})
        kubectl(
            kube_api, "-n", NS, "patch", "configmap", "lightningstor-csi-config", "--type=merge", "-p", patch
        )
        runner = runner_factory(cni=node_cni(agent.env), sandbox_retry=1.0)
        _serve_a_volume(kube_api, runner, service, ls_root)
    finally:
        server.stop(None)
        for device in _loops_of(ls_root):  # only after a failure: the fake's own loop devices
            subprocess.run(["losetup", "-d", device], check=False)


def _serve_a_volume(kube_api: KubeApiHandle, runner: Any, service: Any, ls_root: Path) -> None:
    def drivers_ready() -> dict[str, Any] | None:
        ps = pods(kube_api)
        drivers_ready.last = {n: _statuses(p) for n, p in ps.items()}  # type: ignore[attr-defined]
        ready = {n: p for n, p in ps.items() if _statuses(p).get("lightningstor-csi", {}).get("ready")}
        return ready if len(ready) == len(CSI_PODS) == len(ps) else None

    ps = wait_for(drivers_ready, 60, "both lightningstor-csi containers Ready through their probes",
                  lambda: f"statuses: {drivers_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
    by_workload = {w: p for w in CSI_PODS for n, p in ps.items() if n.startswith(w + "-")}
    for w, p in by_workload.items():
        st = _statuses(p)
        assert st["lightningstor-csi"]["restartCount"] == 0 and "running" in st["lightningstor-csi"]["state"]
        probe = st["liveness-probe"]["state"]["waiting"]
        assert probe["reason"] == "NotBooted" and "serves its /healthz in its place" in probe["message"], w
    ctrl_rt = runner.pods[by_workload["lightningstor-csi-controller"]["metadata"]["uid"]]
    ctrl = csi.channel(ctrl_rt.volumes.made["socket-dir"] / "csi.sock")  # the sidecars' /csi/csi.sock
    node = csi.channel(runner.kubelet_dir / "plugins" / DRIVER_NAME / "csi.sock")  # the registrar's path
    kubelet = csi.Kubelet(runner.settings.node_root, DRIVER_NAME)

    # the PVC as the provisioner reads it (the API double serves no persistentvolumeclaims yet)
    pvc = {"metadata": {"name": "data", "namespace": "default", "uid": str(uuid.uuid4())},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "lightningstor-ssd",
                    "resources": {"requests": {"storage": "64Mi"}}}}  # fmt: skip
    sc = json.loads(kubectl(kube_api, "get", "storageclass", "lightningstor-ssd", "-o", "json"))
    vol = csi.provision(ctrl, sc, pvc)
    remote = service.volumes[vol.handle]
    assert (remote.name, remote.volume_type, remote.replication_factor) == (vol.pv, "ssd", 3)
    node_id = csi.node_id(node)
    assert node_id == "node-1"
    context = csi.attach(ctrl, vol, node_id)
    assert context["device_path"] == service.attachments[(vol.handle, node_id)].device_path

    kubelet.stage(node, vol, context)
    first = str(uuid.uuid4())
    path = kubelet.publish(node, vol, context, first)
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", str(path)], capture_output=True, text=True).stdout
    assert fs.strip() == "ext4", f"{path} is not the volume's ext4 mount on the node: {fs!r}"
    _in_pod(runner, path, "echo written-by-pod-1 > /data/hello.txt; sync")

    kubelet.unpublish(node, vol, first)
    kubelet.unstage(node, vol)
    assert not mounts_under(runner.kubelet_dir), "mounts left on the node after unstage"
    kubelet.stage(node, vol, context)
    second = str(uuid.uuid4())
    path = kubelet.publish(node, vol, context, second)
    assert _in_pod(runner, path, "cat /data/hello.txt").strip() == "written-by-pod-1"

    kubelet.unpublish(node, vol, second)
    kubelet.unstage(node, vol)
    csi.detach(ctrl, vol, node_id)
    csi.delete(ctrl, vol)
    assert not service.volumes and not service.attachments
    assert not list(ls_root.glob("*.img")), "the volume's file is left"
    assert not _loops_of(ls_root), "loop device left"
    assert not mounts_under(runner.kubelet_dir), "mounts left under the kubelet root"
    assert not kubelet.on_host(kubelet.target(vol, second)).exists()
