"""storage.k8s.io: StorageClass, CSIDriver, CSINode, VolumeAttachment (v1) and VolumeAttributesClass
(v1beta1): defaults and validation as k8s.io/kubernetes/pkg/apis/storage/v1/defaults.go and
pkg/apis/storage/validation do them.

Defaults: StorageClass reclaimPolicy Delete, volumeBindingMode Immediate; CSIDriver attachRequired
true, podInfoOnMount false, requiresRepublish false, storageCapacity false, seLinuxMount false,
fsGroupPolicy ReadWriteOnceWithFSType, volumeLifecycleModes [Persistent]; VolumeAttachment status
reset on create.
Validated (422): StorageClass provisioner required, reclaimPolicy/volumeBindingMode values, and
provisioner, parameters, reclaimPolicy, volumeBindingMode immutable; CSIDriver fsGroupPolicy and
volumeLifecycleModes values; CSINode drivers' name and nodeID; VolumeAttachment attacher, nodeName
and exactly one source, spec immutable; VolumeAttributesClass driverName required, driverName and
parameters immutable. Simplified: name formats of drivers and topology keys are not checked.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]
_CSI_DRIVER = {"attachRequired": True, "podInfoOnMount": False, "requiresRepublish": False,
               "storageCapacity": False, "seLinuxMount": False,
               "fsGroupPolicy": "ReadWriteOnceWithFSType"}  # fmt: skip


def _unsupported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    values = ", ".join(f'"{v}"' for v in supported)
    return ("FieldValueNotSupported", path, f'Unsupported value: "{value}": supported values: {values}')


def _required(path: str) -> Cause:
    return ("FieldValueRequired", path, "Required value")


def _immutable(obj: Obj, old: Obj | None, paths: tuple[str, ...], forbidden: bool) -> list[Cause]:
    if old is None:
        return []
    out: list[Cause] = []
    for p in paths:
        if obj.get(p) != old.get(p):
            msg = (
                f"Forbidden: updates to {p} are forbidden."
                if forbidden
                else "Invalid value: field is immutable"
            )
            out.append(("FieldValueForbidden" if forbidden else "FieldValueInvalid", p, msg))
    return out


def _storage_class(obj: Obj, old: Obj | None) -> list[Cause]:
    out = [] if obj.get("provisioner") else [_required("provisioner")]
    if obj.get("reclaimPolicy") not in ("Delete", "Retain"):
        out.append(_unsupported("reclaimPolicy", obj.get("reclaimPolicy"), ("Delete", "Retain")))
    mode = obj.get("volumeBindingMode")
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        out.append(_unsupported("volumeBindingMode", mode, ("Immediate", "WaitForFirstConsumer")))
    out += _immutable(obj, old, ("parameters", "provisioner", "reclaimPolicy"), forbidden=True)
    return out + _immutable(obj, old, ("volumeBindingMode",), forbidden=False)


def _csi_driver(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    out: list[Cause] = []
    policies = ("ReadWriteOnceWithFSType", "File", "None")
    if spec.get("fsGroupPolicy") not in policies:
        out.append(_unsupported("spec.fsGroupPolicy", spec.get("fsGroupPolicy"), policies))
    for i, mode in enumerate(spec.get("volumeLifecycleModes") or []):
        if mode not in ("Persistent", "Ephemeral"):
            out.append(_unsupported(f"spec.volumeLifecycleModes[{i}]", mode, ("Ephemeral", "Persistent")))
    return out


def _csi_node(obj: Obj, old: Obj | None) -> list[Cause]:
    out: list[Cause] = []
    for i, d in enumerate((obj.get("spec") or {}).get("drivers") or []):
        for f in ("name", "nodeID"):
            if not (d or {}).get(f):
                out.append(_required(f"spec.drivers[{i}].{f}"))
    return out


def _volume_attachment(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    out = [_required(f"spec.{f}") for f in ("attacher", "nodeName") if not spec.get(f)]
    source = spec.get("source") or {}
    if sum(1 for k in ("persistentVolumeName", "inlineVolumeSpec") if source.get(k)) != 1:
        why = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
        out.append(("FieldValueRequired", "spec.source", f"Required value: {why}"))
    if old is not None and old.get("spec") != spec:
        out.append(("FieldValueInvalid", "spec", "Invalid value: field is immutable"))
    return out


def _volume_attributes_class(obj: Obj, old: Obj | None) -> list[Cause]:
    out = [] if obj.get("driverName") else [_required("driverName")]
    return out + _immutable(obj, old, ("driverName", "parameters"), forbidden=False)


def apply_defaults(kind: str, obj: Obj) -> None:
    if kind == "StorageClass":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif kind == "CSIDriver" and isinstance(obj.get("spec"), dict):
        for k, v in _CSI_DRIVER.items():
            obj["spec"].setdefault(k, v)
        obj["spec"].setdefault("volumeLifecycleModes", ["Persistent"])


def prepare_create(kind: str, obj: Obj) -> None:
    if kind == "VolumeAttachment":
        obj["status"] = {"attached": False}


_CAUSES = {
    "StorageClass": _storage_class,
    "CSIDriver": _csi_driver,
    "CSINode": _csi_node,
    "VolumeAttachment": _volume_attachment,
    "VolumeAttributesClass": _volume_attributes_class,
}


def causes(kind: str, obj: Obj, old: Obj | None) -> list[Cause]:
    return _CAUSES[kind](obj, old)
