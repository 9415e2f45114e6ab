"""The CSI requests and API objects the sidecar stand-ins build (nodeenv/kubelet/sidecars/), as the
real sidecars build them from a PVC, its StorageClass, a PV and a VolumeSnapshotContent; and how a
sidecar container's args become the stand-in's command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from nodeenv.kubelet.sidecars import launch, stand_in_module
from nodeenv.kubelet.sidecars.attacher import finalizer, publish_request
from nodeenv.kubelet.sidecars.base import feature_gates, sanitize, seconds
from nodeenv.kubelet.sidecars.provisioner import ProvisionError, create_request, parameters, pv_object
from nodeenv.kubelet.sidecars.resizer import expand_request
from nodeenv.kubelet.sidecars.snapshotter import snapshot_request, snapshot_status
from nodeenv.kubelet.sidecars.volumecaps import quantity
from nodeenv.kubelet.storage.csivolumes import attachment_name, staging_path, target_path
from nodeenv.kubelet.volumes import Mount
from protos import csi_pb2

Mode = csi_pb2.VolumeCapability.AccessMode.Mode
SC = {
    "metadata": {"name": "lightningstor-ssd"},
    "provisioner": "stor.plasmacloud.io",
    "reclaimPolicy": "Delete",
    "parameters": {"type": "ssd", "replication": "3", "csi.storage.k8s.io/fstype": "xfs"},
    "mountOptions": ["noatime"],
}
PVC = {
    "metadata": {"name": "data", "namespace": "team-a", "uid": "1234", "resourceVersion": "7"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
}


def test_create_volume_request_is_the_provisioners() -> None:
    topo = csi_pb2.TopologyRequirement(requisite=[csi_pb2.Topology(segments={"k": "node-1"})])
    req = create_request(
        PVC, SC, default_fstype="ext4", extra_metadata=True, multi_writer=True, topology=topo
    )
    assert req.name == "pvc-1234" and req.capacity_range.required_bytes == 64 << 20
    assert dict(req.parameters) == {
        "type": "ssd",
        "replication": "3",
        "csi.storage.k8s.io/pvc/name": "data",
        "csi.storage.k8s.io/pvc/namespace": "team-a",
        "csi.storage.k8s.io/pv/name": "pvc-1234",
    }
    (cap,) = req.volume_capabilities
    assert (cap.mount.fs_type, list(cap.mount.mount_flags)) == ("xfs", ["noatime"])
    assert cap.access_mode.mode == Mode.SINGLE_NODE_MULTI_WRITER
    assert req.accessibility_requirements.requisite[0].segments["k"] == "node-1"
    plain = create_request(
        PVC,
        {**SC, "parameters": {}},
        default_fstype="ext4",
        extra_metadata=False,
        multi_writer=False,
        topology=None,
    )
    assert plain.volume_capabilities[0].mount.fs_type == "ext4" and not plain.parameters
    assert plain.volume_capabilities[0].access_mode.mode == Mode.SINGLE_NODE_WRITER
    assert not plain.HasField("accessibility_requirements")


def test_unknown_reserved_parameter_is_refused() -> None:
    with pytest.raises(ProvisionError, match=r'unknown parameter key "csi\.storage\.k8s\.io/nope"'):
        parameters({"parameters": {"csi.storage.k8s.io/nope": "x"}}, PVC, "pvc-1", False)


def test_pv_object_is_the_provisioners() -> None:
    req = create_request(
        PVC, SC, default_fstype="ext4", extra_metadata=False, multi_writer=True, topology=None
    )
    vol = csi_pb2.Volume(
        volume_id="ls-1",
        capacity_bytes=96 << 20,
        volume_context={"a": "b"},
        accessible_topology=[csi_pb2.Topology(segments={"k": "node-1"})],
    )
    pv = pv_object(PVC, SC, req, vol, "stor.plasmacloud.io", "ident")
    assert pv["metadata"] == {
        "name": "pvc-1234",
        "annotations": {"pv.kubernetes.io/provisioned-by": "stor.plasmacloud.io"},
        "finalizers": ["external-provisioner.volume.kubernetes.io/finalizer"],
    }
    spec = pv["spec"]
    assert spec["capacity"] == {"storage": "96Mi"} and spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["claimRef"]["uid"] == "1234" and spec["claimRef"]["namespace"] == "team-a"
    assert spec["csi"] == {
        "driver": "stor.plasmacloud.io",
        "volumeHandle": "ls-1",
        "fsType": "xfs",
        "volumeAttributes": {"a": "b", "storage.kubernetes.io/csiProvisionerIdentity": "ident"},
    }
    assert spec["mountOptions"] == ["noatime"] and spec["storageClassName"] == "lightningstor-ssd"
    term = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term == [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["node-1"]}]}]


PV: dict[str, Any] = {
    "metadata": {"name": "pvc-1234"},
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "capacity": {"storage": "64Mi"},
        "csi": {
            "driver": "stor.plasmacloud.io",
            "volumeHandle": "ls-1",
            "fsType": "ext4",
            "volumeAttributes": {"a": "b"},
        },
    },
}


def test_attach_resize_requests_carry_the_pvs_capability() -> None:
    pub = publish_request(PV, "node-1", multi_writer=False)
    assert (pub.volume_id, pub.node_id, dict(pub.volume_context), pub.readonly) == (
        "ls-1",
        "node-1",
        {"a": "b"},
        False,
    )
    assert pub.volume_capability.mount.fs_type == "ext4"
    assert pub.volume_capability.access_mode.mode == Mode.SINGLE_NODE_WRITER
    grow = expand_request(PV, 128 << 20, multi_writer=True)
    assert (grow.volume_id, grow.capacity_range.required_bytes) == ("ls-1", 128 << 20)
    assert grow.volume_capability.access_mode.mode == Mode.SINGLE_NODE_MULTI_WRITER
    assert finalizer("stor.plasmacloud.io") == "external-attacher/stor-plasmacloud-io"


def test_snapshot_request_and_status() -> None:
    content = {
        "metadata": {"name": "snapcontent-9"},
        "spec": {
            "source": {"volumeHandle": "ls-1"},
            "volumeSnapshotRef": {"name": "s", "namespace": "team-a", "uid": "9"},
        },
    }
    klass = {"parameters": {"x": "y", "csi.storage.k8s.io/snapshotter-secret-name": "z"}}
    req = snapshot_request(content, klass, extra_metadata=True, prefix="snapshot")
    assert (req.name, req.source_volume_id) == ("snapshot-9", "ls-1")
    assert dict(req.parameters) == {
        "x": "y",
        "csi.storage.k8s.io/volumesnapshot/name": "s",
        "csi.storage.k8s.io/volumesnapshot/namespace": "team-a",
        "csi.storage.k8s.io/volumesnapshotcontent/name": "snapcontent-9",
    }
    snap = csi_pb2.Snapshot(
        snapshot_id="snap-1", size_bytes=5, ready_to_use=True, creation_time=Timestamp(seconds=2, nanos=3)
    )
    assert snapshot_status(snap) == {
        "snapshotHandle": "snap-1",
        "creationTime": 2_000_000_003,
        "readyToUse": True,
        "restoreSize": 5,
        "error": None,
    }


def test_kubelet_paths_and_attachment_name() -> None:
    assert str(staging_path("d", "h")).startswith("/var/lib/kubelet/plugins/kubernetes.io/csi/d/")
    assert str(target_path("u", "pv")) == "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount"
    assert attachment_name("h", "d", "n") == "csi-" + __import__("hashlib").sha256(b"hdn").hexdigest()


def test_flags_and_names() -> None:
    assert seconds("60s") == 60 and seconds("1m30s") == 90 and seconds("500ms") == 0.5
    assert (
        sanitize("external-attacher-leader-stor.plasmacloud.io")
        == "external-attacher-leader-stor-plasmacloud-io"
    )
    assert feature_gates("Topology=true,VolumeAttributesClass=false") == {
        "Topology": True,
        "VolumeAttributesClass": False,
    }
    assert [quantity(n) for n in (64 << 20, 1 << 30, 1000)] == ["64Mi", "1Gi", "1000"]


def test_sidecar_args_become_the_stand_ins_command_line(tmp_path: Path) -> None:
    image = "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0"
    assert stand_in_module(image) == "nodeenv.kubelet.sidecars.provisioner"
    assert stand_in_module("registry.plasmacloud.io/k8shost:0.1.0") is None
    mounts = [
        Mount(tmp_path / "socket-dir", "/csi", False),
        Mount(tmp_path / "sa", "/var/run/secrets/kubernetes.io/serviceaccount", True),
    ]
    c = {
        "name": "csi-provisioner",
        "image": image,
        "args": ["--csi-address", "/csi/csi.sock", "--leader-election"],
    }
    argv = launch.argv("nodeenv.kubelet.sidecars.provisioner", c, mounts, "ctrl-0")
    assert argv[1:] == [
        "-m",
        "nodeenv.kubelet.sidecars.provisioner",
        f"--csi-address={tmp_path}/socket-dir/csi.sock",
        "--leader-election",
        "--pod-name=ctrl-0",
        f"--serviceaccount-dir={tmp_path}/sa",
    ]
