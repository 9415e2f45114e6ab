"""The control-plane parts of the storage path the runner plays (nodeenv/kubelet/storage/), against
the API double with the overlay's StorageClasses and snapshot CRDs, one sync at a time: the PV
controller, the scheduler's volume binding and the snapshot-controller (no node, no driver: the
objects they read and write, as kube-controller-manager, kube-scheduler and external-snapshotter's
snapshot-controller write them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.kubelet.storage.pvcontroller import PVController
from nodeenv.kubelet.storage.snapshotcontroller import SnapshotController
from nodeenv.kubelet.storage.volumebinding import VolumeBinding
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubeapi.test_kubeapi_overlay import OVERLAY, install_crds
from tests.kubeapi_fixture import KubeApiHandle

NS = "default"
PVCS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"


def _claim(name: str, sc: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                     "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip


def _pv(claim: dict[str, Any]) -> dict[str, Any]:
    m = claim["metadata"]
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pvc-{m['uid']}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "lightningstor-hdd",
                     "claimRef": {"namespace": NS, "name": m["name"], "uid": m["uid"]},
                     "csi": {"driver": "stor.plasmacloud.io", "volumeHandle": "ls-1"}}}  # fmt: skip


def _events(api: KubeApiHandle, name: str) -> set[tuple[str, str]]:
    return {
        (e["type"], e["reason"]) for e in api.objects("events", NS) if e["involvedObject"]["name"] == name
    }


def test_pv_controller_and_volume_binding(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    install_crds(kube_api, tmp_path)
    kubectl(kube_api, "apply", "-k", str(OVERLAY))
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    register_node(client, "node-1", "127.0.0.1", {})
    pvc = PVController(client)
    hdd = client.request("POST", PVCS, _claim("hdd", "lightningstor-hdd"))  # Immediate
    client.request("POST", PVCS, _claim("ssd", "lightningstor-ssd"))  # WaitForFirstConsumer
    client.request("POST", PVCS, _claim("lost", "no-such-class"))
    pvc.sync()
    ann = kube_api.get("persistentvolumeclaims", NS, "hdd")["metadata"]["annotations"]
    assert ann["volume.kubernetes.io/storage-provisioner"] == "stor.plasmacloud.io"
    assert ("Normal", "ExternalProvisioning") in _events(kube_api, "hdd")
    assert ("Normal", "WaitForFirstConsumer") in _events(kube_api, "ssd")
    assert ("Warning", "ProvisioningFailed") in _events(kube_api, "lost")
    assert "annotations" not in kube_api.get("persistentvolumeclaims", NS, "ssd")["metadata"]

    # the provisioner's PV for the Immediate claim: bound both ways
    client.request("POST", "/api/v1/persistentvolumes", _pv(hdd))
    pvc.sync()
    bound = kube_api.get("persistentvolumeclaims", NS, "hdd")
    assert (bound["spec"]["volumeName"], bound["status"]["phase"]) == (
        f"pvc-{hdd['metadata']['uid']}",
        "Bound",
    )
    assert bound["status"]["capacity"] == {"storage": "1Gi"}
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert (
        kube_api.get("persistentvolumes", "", f"pvc-{hdd['metadata']['uid']}")["status"]["phase"] == "Bound"
    )

    # a Pod using the WaitForFirstConsumer claim: the claim gets the node, the Pod waits for it
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"},
           "spec": {"containers": [{"name": "c", "image": "x"}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "ssd"}},
                                {"name": "e", "persistentVolumeClaim": {"claimName": "hdd"}}]}}  # fmt: skip
    client.request("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    binding = VolumeBinding(client)
    binding.sync()
    ssd = kube_api.get("persistentvolumeclaims", NS, "ssd")
    assert ssd["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node-1"
    assert not kube_api.get("pods", NS, "app")["spec"].get("nodeName")
    pvc.sync()  # now the PV controller hands it to the provisioner
    ssd = kube_api.get("persistentvolumeclaims", NS, "ssd")
    assert ssd["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "stor.plasmacloud.io"
    client.request("POST", "/api/v1/persistentvolumes", _pv(ssd) | {"metadata": {"name": "pv-ssd"}})
    pvc.sync()
    binding.sync()
    assert kube_api.get("pods", NS, "app")["spec"]["nodeName"] == "node-1"

    # the claim goes: its PV is Released (the provisioner deletes it, reclaimPolicy Delete)
    client.request("DELETE", f"{PVCS}/hdd")
    pvc.sync()
    assert (
        kube_api.get("persistentvolumes", "", f"pvc-{hdd['metadata']['uid']}")["status"]["phase"]
        == "Released"
    )


def test_snapshot_controller(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    install_crds(kube_api, tmp_path)
    kubectl(kube_api, "apply", "-k", str(OVERLAY))
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    claim = client.request("POST", PVCS, _claim("data", "lightningstor-hdd"))
    client.request("POST", "/api/v1/persistentvolumes", _pv(claim))
    PVController(client).sync()
    snap = {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": "s"},
            "spec": {"volumeSnapshotClassName": "lightningstor-snapshots",
                     "source": {"persistentVolumeClaimName": "data"}}}  # fmt: skip
    base = "/apis/snapshot.storage.k8s.io/v1"
    vs = client.request("POST", f"{base}/namespaces/{NS}/volumesnapshots", snap)
    ctrl = SnapshotController(client)
    ctrl.sync()
    name = f"snapcontent-{vs['metadata']['uid']}"
    content = client.request("GET", f"{base}/volumesnapshotcontents/{name}")
    assert content["spec"]["source"] == {"volumeHandle": "ls-1"}
    assert (content["spec"]["driver"], content["spec"]["deletionPolicy"]) == ("stor.plasmacloud.io", "Delete")
    assert content["spec"]["volumeSnapshotRef"]["uid"] == vs["metadata"]["uid"]
    # the sidecar's status, copied to the snapshot's
    status = {"snapshotHandle": "snap-1", "readyToUse": True, "restoreSize": 1 << 30, "creationTime": 10**18}
    client.request("PATCH", f"{base}/volumesnapshotcontents/{name}/status", {"status": status},
                   "application/merge-patch+json")  # fmt: skip
    ctrl.sync()
    got = client.request("GET", f"{base}/namespaces/{NS}/volumesnapshots/s")["status"]
    assert got == {"boundVolumeSnapshotContentName": name, "readyToUse": True, "restoreSize": "1Gi",
                   "creationTime": "2001-09-09T01:46:40Z"}  # fmt: skip
    # deleted: the content is marked and deleted (the sidecar's finalizer holds it until DeleteSnapshot)
    client.request("DELETE", f"{base}/namespaces/{NS}/volumesnapshots/s")
    ctrl.sync()
    content = client.request("GET", f"{base}/volumesnapshotcontents/{name}")
    assert content["metadata"]["deletionTimestamp"]
    assert (
        content["metadata"]["annotations"]["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"]
        == "yes"
    )
