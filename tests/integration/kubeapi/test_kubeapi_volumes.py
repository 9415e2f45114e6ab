"""PersistentVolumeClaims and PersistentVolumes on the API double, through kubectl and the official
client: what a user of the `lightningstor-ssd` StorageClass writes and what external-provisioner
creates, with kube-apiserver's defaults and refusals (422 Invalid, its field paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.kubeapi.official_client import api
from tests.integration.kubeapi.test_kubeapi_kubectl import apply_file, kubectl, kubectl_json
from tests.integration.kubeapi.test_kubeapi_official_client import status_of
from tests.kubeapi_fixture import KubeApiHandle

__all__ = ["api"]  # the official client's fixture
NS = "default"
PVC = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: lightningstor-ssd
  resources: {requests: {storage: 1Gi}}
"""


def pv(name: str, **spec: Any) -> dict[str, Any]:
    csi = {"driver": "stor.plasmacloud.io", "volumeHandle": f"vol-{name}", "fsType": "ext4"}
    base = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "lightningstor-ssd", "csi": csi}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {**base, **spec},
    }


def test_kubectl_applies_a_claim_and_it_is_defaulted(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    assert "persistentvolumeclaim/data created" in apply_file(kube_api, tmp_path, PVC, "-n", NS)
    claim = kubectl_json(kube_api, "-n", NS, "get", "pvc", "data")
    assert claim["spec"]["volumeMode"] == "Filesystem" and claim["status"] == {"phase": "Pending"}
    assert "data" in kubectl(kube_api, "-n", NS, "get", "persistentvolumeclaims")
    # expansion is the one spec change allowed, and only upwards
    kubectl(
        kube_api,
        "-n",
        NS,
        "patch",
        "pvc",
        "data",
        "-p",
        '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}',
    )
    shrink = kubectl(kube_api, "-n", NS, "patch", "pvc", "data", "-p",
                     '{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}', check=False)  # fmt: skip
    assert "field can not be less than status.capacity" in shrink
    moved = kubectl(kube_api, "-n", NS, "patch", "pvc", "data", "-p", '{"spec":{"storageClassName":"other"}}',
                    check=False)  # fmt: skip
    assert "spec is immutable after creation" in moved
    assert (
        kubectl_json(kube_api, "-n", NS, "get", "pvc", "data")["spec"]["resources"]["requests"]["storage"]
        == "2Gi"
    )


def test_official_client_volumes_and_refusals(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    made = core.create_persistent_volume(pv("pv-1"))
    assert made.spec.persistent_volume_reclaim_policy == "Retain" and made.status.phase == "Pending"
    made.status.phase = "Available"
    assert core.replace_persistent_volume_status("pv-1", made).status.phase == "Available"
    assert [p.metadata.name for p in core.list_persistent_volume().items] == ["pv-1"]

    for body, field in (
        (pv("pv-2", csi=None), "spec"),
        (pv("pv-4", accessModes=["ReadWriteOncePod", "ReadOnlyMany"]), "spec.accessModes"),
        (pv("pv-5", capacity={}), "spec.capacity"),
    ):
        with pytest.raises(ApiException) as refused:
            core.create_persistent_volume(body)
        status = status_of(refused.value)
        assert refused.value.status == 422 and status["reason"] == "Invalid"
        assert field in [c["field"] for c in status["details"]["causes"]], status
    claim = {"metadata": {"name": "bad"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {}}}
    with pytest.raises(ApiException) as no_size:
        core.create_namespaced_persistent_volume_claim(NS, claim)
    assert status_of(no_size.value)["message"] == (
        'PersistentVolumeClaim "bad" is invalid: spec.resources[storage]: Required value'
    )


def test_binding_a_claim_and_a_pod(api: client.ApiClient) -> None:
    """What the PV controller and the scheduler write: a claim's volumeName once (then immutable),
    a Pod's node through pods/binding once (409 when it is already bound)."""
    core = client.CoreV1Api(api)
    core.create_namespaced_persistent_volume_claim(NS, {"metadata": {"name": "c"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})  # fmt: skip
    bound = core.patch_namespaced_persistent_volume_claim("c", NS, {"spec": {"volumeName": "pv-9"}})
    assert bound.spec.volume_name == "pv-9"
    with pytest.raises(ApiException) as moved:
        core.patch_namespaced_persistent_volume_claim("c", NS, {"spec": {"volumeName": "pv-10"}})
    assert moved.value.status == 422 and "spec is immutable" in status_of(moved.value)["message"]

    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    core.create_namespaced_pod(NS, pod)
    target = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p"), target=client.V1ObjectReference(kind="Node", name="node-1")
    )
    core.create_namespaced_pod_binding("p", NS, target, _preload_content=False)
    assert core.read_namespaced_pod("p", NS).spec.node_name == "node-1"
    with pytest.raises(ApiException) as again:
        core.create_namespaced_pod_binding("p", NS, target)
    assert again.value.status == 409
    assert status_of(again.value)["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-1"'
    )
