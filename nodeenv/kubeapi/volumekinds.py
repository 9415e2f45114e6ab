"""PersistentVolumeClaims and PersistentVolumes (core/v1): defaults and validation as
pkg/apis/core/v1/defaults.go and pkg/apis/core/validation do them for what a CSI driver's users
write (a PVC naming a StorageClass; a PV the external-provisioner creates with a `csi` source).

Defaults: volumeMode Filesystem on both; a PV's persistentVolumeReclaimPolicy Retain; status
{phase: Pending} on create for both (what the PV controller later moves on; nothing runs it here).
Validated (422): accessModes required and each one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany,
ReadWriteOncePod (which excludes the others); a claim's resources.requests.storage required and a
PV's capacity.storage; volumeMode Filesystem or Block; a PV has exactly one volume source and a
csi source names its driver and volumeHandle; a claim's spec is immutable after creation except
resources.requests (expansion: only upwards) and volumeAttributesClassName. Simplified: quantities
are compared as the decimal/binary suffixes say, not every Quantity form. A claim's volumeName may be
set once (the PV controller's binding), as kube-apiserver allows.
"""

from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]
KINDS = frozenset({"PersistentVolumeClaim", "PersistentVolume"})
MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_SOURCES = ("csi", "hostPath", "local", "nfs", "iscsi", "fc", "rbd", "cephfs", "gcePersistentDisk",
            "awsElasticBlockStore", "azureDisk", "azureFile", "flexVolume", "glusterfs", "portworxVolume",
            "quobyte", "scaleIO", "storageos", "vsphereVolume", "photonPersistentDisk", "cinder",
            "flocker")  # fmt: skip
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_FACTORS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}  # fmt: skip


def quantity_bytes(value: Any) -> float | None:
    m = _QUANTITY.match(str(value)) if isinstance(value, str | int) else None
    return float(m.group(1)) * _FACTORS[m.group(2) or ""] if m else None


def apply_defaults(kind: str, obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("volumeMode", "Filesystem")
    if kind == "PersistentVolume":
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")


def prepare_create(kind: str, obj: Obj) -> None:
    obj["status"] = {"phase": "Pending"}


def _access_modes(spec: Obj) -> list[Cause]:
    modes = spec.get("accessModes") or []
    if not modes:
        return [
            ("FieldValueRequired", "spec.accessModes", "Required value: at least 1 access mode is required")
        ]
    out: list[Cause] = []
    for m in modes:
        if m not in MODES:
            supported = ", ".join(f'"{x}"' for x in MODES)
            out.append(("FieldValueNotSupported", "spec.accessModes",
                        f'Unsupported value: "{m}": supported values: {supported}'))  # fmt: skip
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        out.append(("FieldValueForbidden", "spec.accessModes",
                     "Forbidden: may not use ReadWriteOncePod with other access modes"))  # fmt: skip
    return out


def _storage(path: str, holder: Any) -> list[Cause]:
    value = (holder or {}).get("storage") if isinstance(holder, dict) else None
    if value is None:
        return [("FieldValueRequired", path, "Required value")]
    if quantity_bytes(value) is None:
        return [("FieldValueInvalid", path, f'Invalid value: "{value}": must be a quantity')]
    return []


def _volume_mode(spec: Obj) -> list[Cause]:
    mode = spec.get("volumeMode")
    if mode in ("Filesystem", "Block"):
        return []
    return [("FieldValueNotSupported", "spec.volumeMode",
             f'Unsupported value: "{mode}": supported values: "Block", "Filesystem"')]  # fmt: skip


def _claim(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    requests = (spec.get("resources") or {}).get("requests")
    out = _access_modes(spec) + _storage("spec.resources[storage]", requests) + _volume_mode(spec)
    if old is None or out:
        return out
    before = old.get("spec") or {}
    mutable: tuple[str, ...] = ("resources", "volumeAttributesClassName")
    if not before.get("volumeName"):  # the PV controller binds a claim: volumeName may be set once
        mutable += ("volumeName",)
    if {k: v for k, v in spec.items() if k not in mutable} != {
        k: v for k, v in before.items() if k not in mutable
    }:
        out.append(("FieldValueForbidden", "spec",
                    "Forbidden: spec is immutable after creation except resources.requests and "
                    "volumeAttributesClassName for bound claims"))  # fmt: skip
    was = quantity_bytes(((before.get("resources") or {}).get("requests") or {}).get("storage"))
    now = quantity_bytes((requests or {}).get("storage"))
    if was is not None and now is not None and now < was:
        out.append(("FieldValueForbidden", "spec.resources.requests.storage",
                    "Forbidden: field can not be less than status.capacity"))  # fmt: skip
    return out


def _volume(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    out = _access_modes(spec) + _storage("spec.capacity", spec.get("capacity")) + _volume_mode(spec)
    sources = [s for s in _SOURCES if spec.get(s)]
    if len(sources) != 1:
        why = "must specify a volume type" if not sources else "may not specify more than 1 volume type"
        out.append(("FieldValueRequired" if not sources else "FieldValueForbidden", "spec", why))
    csi = spec.get("csi") if isinstance(spec.get("csi"), dict) else None
    for f in ("driver", "volumeHandle"):
        if csi is not None and not csi.get(f):
            out.append(("FieldValueRequired", f"spec.csi.{f}", "Required value"))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in ("Delete", "Recycle", "Retain"):
        supported = '"Delete", "Recycle", "Retain"'
        out.append(("FieldValueNotSupported", "spec.persistentVolumeReclaimPolicy",
                    f'Unsupported value: "{policy}": supported values: {supported}'))  # fmt: skip
    return out


def causes(kind: str, obj: Obj, old: Obj | None) -> list[Cause]:
    return _claim(obj, old) if kind == "PersistentVolumeClaim" else _volume(obj, old)
