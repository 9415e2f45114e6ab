"""daemonsets/csi: the objects a cluster admin applies agree with the driver and the spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from csi.qos import QOS_CLASSES, limits_from
from csi.settings import DEFAULT_ENDPOINT, DRIVER_NAME, CsiSettings

DIR = Path(__file__).resolve().parents[3] / "daemonsets" / "csi"


def _objects() -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for path in DIR.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] != "Kustomization":
                out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def _containers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in obj["spec"]["template"]["spec"]["containers"]}


def test_kustomization_lists_every_file() -> None:
    k = yaml.safe_load((DIR / "kustomization.yaml").read_text())
    assert set(k["resources"]) == {p.name for p in DIR.glob("*.yaml")} - {"kustomization.yaml"}


def test_csidriver_and_storage_classes_match_the_spec() -> None:
    objs = _objects()
    assert objs[("CSIDriver", DRIVER_NAME)]["spec"]["attachRequired"] is True
    ssd, hdd = objs[("StorageClass", "lightningstor-ssd")], objs[("StorageClass", "lightningstor-hdd")]
    assert ssd["provisioner"] == hdd["provisioner"] == DRIVER_NAME
    assert (ssd["parameters"]["type"], ssd["parameters"]["replication"]) == ("ssd", "3")
    assert (hdd["parameters"]["type"], hdd["parameters"]["replication"]) == ("hdd", "2")
    assert ssd["volumeBindingMode"] == "WaitForFirstConsumer" and hdd["volumeBindingMode"] == "Immediate"
    assert ssd["reclaimPolicy"] == "Delete" and hdd["reclaimPolicy"] == "Retain"
    assert ssd["allowVolumeExpansion"] and hdd["allowVolumeExpansion"]


def test_driver_containers_parse_with_the_real_settings() -> None:
    objs = _objects()
    config = objs[("ConfigMap", "lightningstor-csi-config")]["data"]
    for kind, name, mode in (
        ("Deployment", "lightningstor-csi-controller", "controller"),
        ("DaemonSet", "lightningstor-csi-node", "node"),
    ):
        driver = _containers(objs[(kind, name)])["lightningstor-csi"]
        assert driver["command"] == ["lightningstor-csi"]
        settings = CsiSettings.from_args(driver["args"], {**config, "CSI_NODE_ID": "node-1"})
        assert settings.mode == mode and settings.backend == "lightningstor"
        sidecar_socket = "/csi/csi.sock" if mode == "controller" else settings.socket_path.as_posix()
        for c in _containers(objs[(kind, name)]).values():
            if c["name"] != "lightningstor-csi":
                assert f"--csi-address={sidecar_socket}" in c["args"], c["name"]


def test_node_plugin_socket_is_where_kubelet_looks() -> None:
    node = _containers(_objects()[("DaemonSet", "lightningstor-csi-node")])
    assert f"--endpoint={DEFAULT_ENDPOINT}" in node["lightningstor-csi"]["args"]
    reg = node["node-driver-registrar"]["args"]
    assert f"--kubelet-registration-path={DEFAULT_ENDPOINT.removeprefix('unix://')}" in reg
    assert node["lightningstor-csi"]["securityContext"]["privileged"] is True
    mounts = {m["mountPath"]: m for m in node["lightningstor-csi"]["volumeMounts"]}
    assert mounts["/var/lib/kubelet"]["mountPropagation"] == "Bidirectional"


def test_volume_attributes_classes_carry_parameters_the_driver_accepts() -> None:
    classes = [o for (kind, _), o in _objects().items() if kind == "VolumeAttributesClass"]
    assert {c["parameters"]["qosClass"] for c in classes} == set(QOS_CLASSES)
    for c in classes:
        assert c["driverName"] == DRIVER_NAME and c["apiVersion"] == "storage.k8s.io/v1beta1"
        limits_from(c["parameters"])  # raises InvalidArgument if the driver would refuse the class


def test_group_snapshot_class_and_sidecar_feature_gates() -> None:
    objs = _objects()
    vgsc = objs[("VolumeGroupSnapshotClass", "lightningstor-group-snapshots")]
    assert vgsc["driver"] == DRIVER_NAME and vgsc["apiVersion"].startswith("groupsnapshot.storage.k8s.io/")
    sidecars = _containers(objs[("Deployment", "lightningstor-csi-controller")])

    def gates(name: str) -> set[str]:
        flags = [a for a in sidecars[name]["args"] if a.startswith("--feature-gates=")]
        return {g for f in flags for g in f.removeprefix("--feature-gates=").split(",")}

    assert "VolumeAttributesClass=true" in gates("csi-provisioner")
    assert "VolumeAttributesClass=true" in gates("csi-resizer")
    assert "CSIVolumeGroupSnapshot=true" in gates("csi-snapshotter")
    rules = objs[("ClusterRole", "lightningstor-csi-controller")]["rules"]
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("storage.k8s.io", "volumeattributesclasses") in granted
    assert ("groupsnapshot.storage.k8s.io", "volumegroupsnapshotcontents") in granted
    assert ("groupsnapshot.storage.k8s.io", "volumegroupsnapshotclasses") in granted
