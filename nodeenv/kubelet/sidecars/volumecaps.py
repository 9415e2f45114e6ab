"""The CSI VolumeCapability a PV or PVC stands for, as the sidecars and kubelet's CSI plugin build
it (external-provisioner's getVolumeCapability, csi-lib-utils' accessmodes): each Kubernetes access
mode mapped to its CSI mode (ReadWriteOnce -> SINGLE_NODE_MULTI_WRITER when the driver has that
capability, else SINGLE_NODE_WRITER; ReadWriteOncePod -> SINGLE_NODE_SINGLE_WRITER likewise),
`mount` with the fsType and mount options, or `block`; and quantities both ways."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nodeenv.kubeapi.volumekinds import quantity_bytes
from protos import csi_pb2

Obj = dict[str, Any]
Mode = csi_pb2.VolumeCapability.AccessMode.Mode
_UNITS = (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def access_mode(modes: Iterable[str], single_node_multi_writer: bool) -> int:
    have = set(modes)
    if "ReadWriteOncePod" in have:
        mode = Mode.SINGLE_NODE_SINGLE_WRITER if single_node_multi_writer else Mode.SINGLE_NODE_WRITER
    elif "ReadWriteMany" in have:
        mode = Mode.MULTI_NODE_MULTI_WRITER
    elif "ReadOnlyMany" in have and "ReadWriteOnce" not in have:
        mode = Mode.MULTI_NODE_READER_ONLY
    else:
        mode = Mode.SINGLE_NODE_MULTI_WRITER if single_node_multi_writer else Mode.SINGLE_NODE_WRITER
    return int(mode)


def capability(
    modes: Iterable[str], volume_mode: str, fs_type: str, mount_flags: Iterable[str], multi_writer: bool
) -> csi_pb2.VolumeCapability:
    mode = csi_pb2.VolumeCapability.AccessMode(mode=access_mode(modes, multi_writer))
    if volume_mode == "Block":
        return csi_pb2.VolumeCapability(block=csi_pb2.VolumeCapability.BlockVolume(), access_mode=mode)
    mount = csi_pb2.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(mount_flags))
    return csi_pb2.VolumeCapability(mount=mount, access_mode=mode)


def pv_capability(pv: Obj, multi_writer: bool) -> csi_pb2.VolumeCapability:
    spec = pv["spec"]
    return capability(
        spec.get("accessModes") or [],
        spec.get("volumeMode", "Filesystem"),
        spec["csi"].get("fsType", ""),
        spec.get("mountOptions") or [],
        multi_writer,
    )


def to_bytes(value: Any) -> int:
    got = quantity_bytes(value)
    if got is None:
        raise ValueError(f"not a quantity: {value!r}")
    return int(got)


def quantity(n: int) -> str:
    """resource.NewQuantity(n, BinarySI).String(): the largest binary suffix dividing it."""
    for suffix, factor in _UNITS:
        if n and n % factor == 0:
            return f"{n // factor}{suffix}"
    return str(n)
