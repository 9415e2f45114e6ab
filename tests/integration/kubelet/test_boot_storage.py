"""The cluster admin's storage path on the booted overlay, through kubectl: the runner boots
lightningstor-csi-controller and lightningstor-csi-node from the image, stands in for their CSI
sidecars (nodeenv/kubelet/sidecars/: provisioner, attacher, resizer, snapshotter, registrar,
livenessprobe) and plays kubelet, the PV controller, the scheduler's volume binding, the
attach-detach controller and the snapshot-controller (nodeenv/kubelet/storage/). The backend is the
faithful LightningStor VolumeService fake (real loop devices) on the node's management address; the
API double enforces RBAC, so the sidecars work within daemonsets/csi/rbac.yaml.

A PVC of the overlay's `lightningstor-ssd` class (WaitForFirstConsumer) and a Pod using it, both
created with kubectl: the PVC is bound to a PV the driver provisioned, the Pod's file lands on the
backend's volume, expanding the PVC grows the volume and the Pod's filesystem, a VolumeSnapshot
becomes readyToUse, deleting the Pod unpublishes, unstages and detaches it, deleting the PVC
deletes the volume. Bad input: a PVC of an unknown class, a class the driver refuses."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.boot import SERVER_NAME
from nodeenv.kubelet.rootdir import mounts_under
from nodeenv.kubelet.sandbox import node_cni
from nodeenv.lightningstor import serve
from nodeenv.plasmacloud_auth import DevPki
from tests.cni_agent_fixture import Agent
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubelet.conftest import NS, pods, wait_for
from tests.integration.kubelet.pod_network import api_on_management_port, keep_only, management_ip
from tests.kubeapi_fixture import KubeApiHandle

IMAGE = "registry.plasmacloud.io/k8shost:0.1.0"
DRIVER = "stor.plasmacloud.io"
CONTROLLER_SA = "system:serviceaccount:kube-system:lightningstor-csi-controller"
RBAC = Path("daemonsets/csi/rbac.yaml")
MIB = 1 << 20


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(enforce_rbac=True)


@pytest.fixture
def kube_api(agent: Agent, tmp_path: Path, kube_api_config: ApiConfig) -> Iterator[KubeApiHandle]:
    with api_on_management_port(agent, tmp_path, kube_api_config) as api:
        yield api


@pytest.fixture
def backend(agent: Agent, short_tmp: Path, plasmacloud_pki: DevPki) -> Iterator[tuple[Any, Path, str]]:
    """The LightningStor fake on the management address (set up before the runner, stopped after it:
    the runner's teardown detaches through it), TLS and IAM tokens only: the CSI pods present the
    plasmacloud-credentials Secret (`applied`)."""
    root = short_tmp / f"ls-{uuid.uuid4().hex[:6]}"
    server, service, endpoint = serve(root, ["node-1"], plasmacloud_pki, host=management_ip(agent))
    yield service, root, endpoint
    server.stop(None)
    for device in _loops_of(root):  # only after a failure: the fake's own loop devices
        subprocess.run(["losetup", "-d", device], check=False)


def _get(api: KubeApiHandle, *what: str) -> Any:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(api.kubeconfig), "get", *what, "-o", "json"],
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout) if out.returncode == 0 else None


def _apply(api: KubeApiHandle, tmp: Path, *objs: dict[str, Any]) -> None:
    f = tmp / f"{uuid.uuid4().hex[:6]}.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    kubectl(api, "apply", "-f", str(f))


def _events(api: KubeApiHandle, name: str) -> list[tuple[str, str, str]]:
    evs = _get(api, "events", "-n", "default", "--field-selector", f"involvedObject.name={name}")
    return [(e["type"], e["reason"], e["message"]) for e in (evs or {}).get("items", [])]


def _loops_of(root: Path) -> list[str]:
    out = subprocess.run(["losetup", "-J", "-l"], capture_output=True, text=True).stdout
    return [
        d["name"]
        for d in json.loads(out or '{"loopdevices": []}')["loopdevices"]
        if (d.get("back-file") or "").startswith(f"{root}/")
    ]


def _holders(root: Path) -> str:
    """Which processes still see a mount of the fake's loop devices (what keeps one busy)."""
    loops = _loops_of(root)
    seen = []
    for info in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            text = info.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if any(f" {dev} " in line for dev in loops):
                cmd = (info.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
                seen.append(f"{info.parent.name} ({cmd}): {line}")
    return f"loop devices {loops}; mounted in: {seen[:5]}"


def _pvc(name: str, sc: str, size: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": sc,
            "resources": {"requests": {"storage": size}},
        },
    }


WRITER = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "writer", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": IMAGE,
                "command": ["sh", "-ec"],
                "args": ["echo hello-from-pod > /data/hello.txt; sync; exec sleep 3600"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }
        ],
        "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    },
}


def test_pvc_through_kubectl_on_the_booted_csi_pods(
    kube_api: KubeApiHandle,
    applied: Path,
    backend: tuple[Any, Path, str],
    runner_factory: Any,
    agent: Agent,
    tmp_path: Path,
) -> None:
    service, ls_root, endpoint = backend
    workloads = ("deployment.apps/lightningstor-csi-controller", "daemonset.apps/lightningstor-csi-node")
    keep_only(kube_api, workloads, replicas=2)  # the overlay's two controllers: their sidecars elect leaders
    patch = json.dumps({"data": {"LIGHTNINGSTOR_ENDPOINT": endpoint, "PLASMACLOUD_SERVER_NAME": SERVER_NAME}})
    kubectl(kube_api, "-n", NS, "patch", "configmap", "lightningstor-csi-config", "--type=merge", "-p", patch)
    runner = runner_factory(cni=node_cni(agent.env), sandbox_retry=1.0)
    _csi_pods_ready(kube_api)
    _volume_lifecycle(kube_api, runner, service, ls_root, tmp_path)
    _bad_input(kube_api, tmp_path)
    rules = [
        r
        for d in yaml.safe_load_all(RBAC.read_text())
        if d["kind"] in ("ClusterRole", "Role")
        for r in d["rules"]
    ]
    assert not kube_api.not_allowed_by(CONTROLLER_SA, rules)
    assert not [r for r in kube_api.requests_by(CONTROLLER_SA) if r.status == 403]


def _csi_pods_ready(api: KubeApiHandle) -> None:
    def ready() -> dict[str, Any] | None:
        ps = pods(api)
        ok = [
            p
            for p in ps.values()
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p.get("status", {}).get("conditions") or []
            )
        ]
        return ps if len(ok) == len(ps) == 3 else None

    ps = wait_for(
        ready,
        90,
        "the CSI pods Ready (two controllers, one node plugin)",
        lambda: json.dumps({n: p.get("status", {}).get("containerStatuses") for n, p in pods(api).items()})[
            :3000
        ],
    )
    for p in ps.values():
        for st in p["status"]["containerStatuses"]:
            if st["name"] == "lightningstor-csi":  # the image's driver, Ready through its own probes
                assert (
                    st["ready"] and st["restartCount"] == 0 and st["containerID"].startswith("podman://")
                ), st
            else:
                assert st["ready"] and st["containerID"].startswith("standin://nodeenv/kubelet/"), st
    csinode = wait_for(lambda: _get(api, "csinode", "node-1"), 30, "the CSINode")
    (drv,) = csinode["spec"]["drivers"]
    assert (drv["name"], drv["nodeID"], drv["topologyKeys"]) == (
        DRIVER,
        "node-1",
        ["topology.stor.plasmacloud.io/node"],
    )
    controllers = {n for n in ps if n.startswith("lightningstor-csi-controller-")}
    names = {
        "stor-plasmacloud-io",
        "external-attacher-leader-stor-plasmacloud-io",
        "external-resizer-stor-plasmacloud-io",
        "external-snapshotter-leader-stor-plasmacloud-io",
    }

    def held() -> dict[str, str] | None:
        got = {
            x["metadata"]["name"]: x["spec"].get("holderIdentity")
            for x in _get(api, "leases", "-n", NS)["items"]
        }
        return got if all(got.get(n) in controllers for n in names) else None

    wait_for(
        held,
        30,
        "the four sidecar Leases held by a controller pod",
        lambda: str(_get(api, "leases", "-n", NS)),
    )


def _volume_lifecycle(api: KubeApiHandle, runner: Any, service: Any, ls_root: Path, tmp: Path) -> None:
    _apply(api, tmp, _pvc("data", "lightningstor-ssd", "64Mi"), WRITER)
    pvc = wait_for(
        lambda: (
            (c := _get(api, "pvc", "data", "-n", "default")) and c["status"].get("phase") == "Bound" and c
        ),
        60,
        "the PVC bound",
        lambda: str(_events(api, "data")),
    )
    pv_name = pvc["spec"]["volumeName"]
    assert pv_name == f"pvc-{pvc['metadata']['uid']}"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node-1"
    pv = _get(api, "pv", pv_name)
    handle = pv["spec"]["csi"]["volumeHandle"]
    assert (pv["spec"]["claimRef"]["uid"], pv["status"]["phase"]) == (pvc["metadata"]["uid"], "Bound")
    remote = service.volumes[handle]
    assert (remote.name, remote.volume_type, remote.replication_factor, remote.size_bytes) == (
        pv_name,
        "ssd",
        3,
        64 * MIB,
    )
    assert any(r == "ProvisioningSucceeded" for _, r, _ in _events(api, "data"))

    pod = _pod_ready(api, "writer")
    uid = pod["metadata"]["uid"]
    mount = runner.kubelet_dir / "pods" / uid / "volumes" / "kubernetes.io~csi" / pv_name / "mount"
    assert (
        wait_for(
            lambda: (mount / "hello.txt").exists() and (mount / "hello.txt").read_text(), 30, "the pod's file"
        ).strip()
        == "hello-from-pod"
    )
    source = subprocess.run(
        ["findmnt", "-n", "-o", "SOURCE", str(mount)], capture_output=True, text=True
    ).stdout.strip()
    back = subprocess.run(
        ["losetup", "-n", "-O", "BACK-FILE", source], capture_output=True, text=True
    ).stdout.strip()
    assert back == str(ls_root / f"{handle}.img"), f"{mount} is {source} backed by {back!r}"
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", str(mount)], capture_output=True, text=True).stdout
    assert fs.strip() == "ext4", f"{mount} is not the class's ext4: {fs!r}"
    (va,) = _get(api, "volumeattachments")["items"]
    assert (va["spec"]["nodeName"], va["status"]["attached"]) == ("node-1", True)

    # expansion: the volume grows (ControllerExpandVolume), then its filesystem (NodeExpandVolume)
    kubectl(
        api,
        "-n",
        "default",
        "patch",
        "pvc",
        "data",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"resources": {"requests": {"storage": "128Mi"}}}}),
    )
    wait_for(
        lambda: _get(api, "pv", pv_name)["spec"]["capacity"]["storage"] == "128Mi",
        60,
        "the PV's capacity 128Mi",
        lambda: str(_events(api, "data")),
    )
    assert service.volumes[handle].size_bytes == 128 * MIB
    assert (ls_root / f"{handle}.img").stat().st_size == 128 * MIB
    uid = _grown(api, runner, pod, tmp)
    # a snapshot
    # a snapshot
    snap = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": "snap", "namespace": "default"},
        "spec": {
            "volumeSnapshotClassName": "lightningstor-snapshots",
            "source": {"persistentVolumeClaimName": "data"},
        },
    }
    _apply(api, tmp, snap)
    vs = wait_for(
        lambda: (
            (s := _get(api, "volumesnapshot", "snap", "-n", "default"))
            and s.get("status", {}).get("readyToUse")
            and s
        ),
        60,
        "the VolumeSnapshot readyToUse",
    )
    assert [s.source_volume_id for s in service.snapshots.values()] == [handle]
    assert vs["status"]["boundVolumeSnapshotContentName"] == f"snapcontent-{vs['metadata']['uid']}"
    kubectl(api, "-n", "default", "delete", "volumesnapshot", "snap")
    wait_for(
        lambda: not service.snapshots and not _get(api, "volumesnapshotcontents")["items"],
        30,
        "the snapshot deleted",
    )

    # the pod goes: unpublished, unstaged, detached
    kubectl(api, "-n", "default", "delete", "pod", "writer")
    wait_for(lambda: uid not in runner.pods, 30, "the runner to stop the pod")
    wait_for(
        lambda: not _get(api, "volumeattachments")["items"] and not service.attachments,
        60,
        "the volume detached",
    )
    assert not mounts_under(runner.kubelet_dir), "mounts left on the node"

    # the claim goes: the volume is deleted (reclaimPolicy Delete)
    kubectl(api, "-n", "default", "delete", "pvc", "data")
    wait_for(
        lambda: _get(api, "pv", pv_name) is None and not service.volumes, 60, "the PV and the volume deleted"
    )
    assert not list(ls_root.glob("*.img")), "the volume's file is left"
    wait_for(lambda: not _loops_of(ls_root), 10, "the loop device released", lambda: _holders(ls_root))


def _pod_ready(api: KubeApiHandle, name: str) -> Any:
    def ready() -> Any:
        p = _get(api, "pod", name, "-n", "default")
        sts = (p or {}).get("status", {}).get("containerStatuses") or []
        return p if sts and sts[0]["ready"] else None

    return wait_for(
        ready, 90, f"pod {name} Running", lambda: json.dumps(_get(api, "pod", name, "-n", "default"))[-1500:]
    )


def _df_kib(runner: Any, uid: str) -> int:
    out = runner.podman("exec", runner.pods[uid].cname("app"), "df", "-k", "/data").stdout
    return int(out.splitlines()[1].split()[1])


def _grown(api: KubeApiHandle, runner: Any, pod: Any, tmp: Path) -> str:
    """The claim's filesystem grown to the new size, in a pod; that pod's uid. Online
    (NodeExpandVolume on the mounted volume) where the node plugin may grow ext4 online
    (CAP_SYS_RESOURCE); otherwise kubelet's NodeExpandVolume fails with the driver's reason (a
    FileSystemResizeFailed Event, the claim kept FileSystemResizePending) and the filesystem is grown
    offline when the next pod stages the volume again, with the data kept."""

    def capacity() -> str:
        return str((_get(api, "pvc", "data", "-n", "default")["status"].get("capacity") or {}).get("storage"))

    def failed() -> list[Any]:
        return [e for e in _events(api, "writer") if e[1] == "FileSystemResizeFailed"]

    wait_for(
        lambda: capacity() == "128Mi" or failed(), 60, "node expansion", lambda: str(_events(api, "data"))
    )
    uid: str = pod["metadata"]["uid"]
    if capacity() != "128Mi":
        assert "CAP_SYS_RESOURCE" in failed()[0][2], failed()
        conds = _get(api, "pvc", "data", "-n", "default")["status"]["conditions"]
        assert [c["type"] for c in conds] == ["FileSystemResizePending"], conds
        kubectl(api, "-n", "default", "delete", "pod", "writer")
        wait_for(
            lambda: not _get(api, "volumeattachments")["items"] and not mounts_under(runner.kubelet_dir),
            60,
            "the first writer's volume unmounted and detached",
        )
        reader = json.loads(json.dumps(WRITER))
        reader["spec"]["containers"][0]["args"] = ["cat /data/hello.txt; exec sleep 3600"]
        _apply(api, tmp, reader)
        pod = _pod_ready(api, "writer")
        uid = pod["metadata"]["uid"]
        wait_for(lambda: capacity() == "128Mi", 60, "the PVC's capacity 128Mi after restaging")
        assert runner.podman("logs", runner.pods[uid].cname("app")).stdout.strip() == "hello-from-pod"
    assert not _get(api, "pvc", "data", "-n", "default")["status"].get("conditions")
    assert _df_kib(runner, uid) > 100 * 1024, "the pod's filesystem did not grow"
    return uid


def _bad_input(api: KubeApiHandle, tmp: Path) -> None:
    bad_sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "tiny-xfs"},
        "provisioner": DRIVER,
        "parameters": {"csi.storage.k8s.io/fstype": "xfs"},
        "volumeBindingMode": "Immediate",
    }
    _apply(api, tmp, _pvc("nowhere", "no-such-class", "16Mi"), bad_sc, _pvc("tiny", "tiny-xfs", "16Mi"))
    missing = ("Warning", "ProvisioningFailed", 'storageclass.storage.k8s.io "no-such-class" not found')
    wait_for(
        lambda: missing in _events(api, "nowhere"),
        30,
        "the unknown class's event",
        lambda: str(_events(api, "nowhere")),
    )
    refused = wait_for(
        lambda: [e for e in _events(api, "tiny") if e[:2] == ("Warning", "ProvisioningFailed")],
        30,
        "the driver's refusal as an event",
        lambda: str(_events(api, "tiny")),
    )
    assert refused[0][2].startswith(
        'failed to provision volume with StorageClass "tiny-xfs": rpc error: code = OutOfRange desc = '
    )
    assert "300 MiB" in refused[0][2], refused
    for name in ("nowhere", "tiny"):
        assert _get(api, "pvc", name, "-n", "default")["status"]["phase"] == "Pending"
