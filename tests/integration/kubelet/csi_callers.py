"""The CSI calls a cluster makes for a PVC's volume, made the way their real callers make them, on the
sockets the booted driver containers serve (their CSI sidecars are not booted):

- external-provisioner (v5, `--extra-create-metadata --default-fstype=ext4`): CreateVolume named
  `pvc-<PVC uid>`, the StorageClass parameters without the reserved `csi.storage.k8s.io/` keys
  (the fstype one becomes the capability's fs_type) plus the PVC/PV names, ReadWriteOnce as
  SINGLE_NODE_MULTI_WRITER when the controller claims it; DeleteVolume;
- external-attacher: ControllerPublishVolume for the node id the node plugin reports (CSINode),
  the PV's capability and volume attributes; ControllerUnpublishVolume;
- kubelet's CSI volume plugin (1.32): NodeStageVolume at
  `<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volume handle)>/globalmount` and
  NodePublishVolume at `<root>/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount`, the
  VolumeAttachment's publish context with both; their parent directories made by kubelet.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import grpc

from protos import csi_pb2, csi_pb2_grpc

KUBELET = PurePosixPath("/var/lib/kubelet")
RESERVED = "csi.storage.k8s.io/"
Mode = csi_pb2.VolumeCapability.AccessMode.Mode
CtrlRpc = csi_pb2.ControllerServiceCapability.RPC


@dataclass(frozen=True)
class Volume:
    handle: str
    pv: str
    capability: csi_pb2.VolumeCapability
    attributes: dict[str, str]


def channel(socket: Path) -> grpc.Channel:
    return grpc.insecure_channel(f"unix://{socket}")


def provision(ch: grpc.Channel, sc: dict[str, Any], pvc: dict[str, Any]) -> Volume:
    ctrl = csi_pb2_grpc.ControllerStub(ch)
    caps = ctrl.ControllerGetCapabilities(csi_pb2.ControllerGetCapabilitiesRequest()).capabilities
    rpcs = {c.rpc.type for c in caps}
    assert CtrlRpc.CREATE_DELETE_VOLUME in rpcs and CtrlRpc.PUBLISH_UNPUBLISH_VOLUME in rpcs, rpcs
    params = dict(sc.get("parameters") or {})
    fs_type = params.get(RESERVED + "fstype", "ext4")
    pv = f"pvc-{pvc['metadata']['uid']}"
    params = {k: v for k, v in params.items() if not k.startswith(RESERVED)}
    meta = pvc["metadata"]
    params |= {RESERVED + "pvc/name": meta["name"], RESERVED + "pvc/namespace": meta["namespace"],
               RESERVED + "pv/name": pv}  # fmt: skip
    mode = (
        Mode.SINGLE_NODE_MULTI_WRITER if CtrlRpc.SINGLE_NODE_MULTI_WRITER in rpcs else Mode.SINGLE_NODE_WRITER
    )
    cap = csi_pb2.VolumeCapability(
        mount=csi_pb2.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=sc.get("mountOptions") or []),
        access_mode=csi_pb2.VolumeCapability.AccessMode(mode=mode),
    )
    size = pvc["spec"]["resources"]["requests"]["storage"]
    req = csi_pb2.CreateVolumeRequest(
        name=pv, capacity_range=csi_pb2.CapacityRange(required_bytes=_bytes(size)),
        volume_capabilities=[cap], parameters=params,
    )  # fmt: skip
    vol = ctrl.CreateVolume(req, timeout=60).volume
    return Volume(vol.volume_id, pv, cap, dict(vol.volume_context))


def node_id(ch: grpc.Channel) -> str:
    """What node-driver-registrar puts in the CSINode (NodeGetInfo), the attacher's node_id."""
    info: str = csi_pb2_grpc.NodeStub(ch).NodeGetInfo(csi_pb2.NodeGetInfoRequest()).node_id
    return info


def attach(ch: grpc.Channel, vol: Volume, node: str) -> dict[str, str]:
    req = csi_pb2.ControllerPublishVolumeRequest(
        volume_id=vol.handle, node_id=node, volume_capability=vol.capability, volume_context=vol.attributes
    )
    return dict(csi_pb2_grpc.ControllerStub(ch).ControllerPublishVolume(req, timeout=60).publish_context)


def detach(ch: grpc.Channel, vol: Volume, node: str) -> None:
    req = csi_pb2.ControllerUnpublishVolumeRequest(volume_id=vol.handle, node_id=node)
    csi_pb2_grpc.ControllerStub(ch).ControllerUnpublishVolume(req, timeout=60)


def delete(ch: grpc.Channel, vol: Volume) -> None:
    csi_pb2_grpc.ControllerStub(ch).DeleteVolume(
        csi_pb2.DeleteVolumeRequest(volume_id=vol.handle), timeout=60
    )


@dataclass(frozen=True)
class Kubelet:
    """kubelet's side on a node whose root directory is `host_root` on this machine."""

    host_root: Path
    driver: str

    def staging(self, vol: Volume) -> PurePosixPath:
        sha = hashlib.sha256(vol.handle.encode()).hexdigest()
        return KUBELET / "plugins" / "kubernetes.io" / "csi" / self.driver / sha / "globalmount"

    def target(self, vol: Volume, pod_uid: str) -> PurePosixPath:
        return KUBELET / "pods" / pod_uid / "volumes" / "kubernetes.io~csi" / vol.pv / "mount"

    def on_host(self, path: PurePosixPath) -> Path:
        return self.host_root / path.relative_to("/")

    def stage(self, ch: grpc.Channel, vol: Volume, publish_context: dict[str, str]) -> None:
        node = csi_pb2_grpc.NodeStub(ch)
        caps = node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest()).capabilities
        assert csi_pb2.NodeServiceCapability.RPC.STAGE_UNSTAGE_VOLUME in {c.rpc.type for c in caps}
        self.on_host(self.staging(vol)).parent.mkdir(parents=True, exist_ok=True)
        node.NodeStageVolume(csi_pb2.NodeStageVolumeRequest(
            volume_id=vol.handle, publish_context=publish_context, staging_target_path=str(self.staging(vol)),
            volume_capability=vol.capability, volume_context=vol.attributes), timeout=120)  # fmt: skip

    def publish(self, ch: grpc.Channel, vol: Volume, publish_context: dict[str, str], pod_uid: str) -> Path:
        """NodePublishVolume; the target's path on this machine (what the pod's container mounts)."""
        target = self.target(vol, pod_uid)
        self.on_host(target).parent.mkdir(parents=True, exist_ok=True)
        csi_pb2_grpc.NodeStub(ch).NodePublishVolume(csi_pb2.NodePublishVolumeRequest(
            volume_id=vol.handle, publish_context=publish_context, staging_target_path=str(self.staging(vol)),
            target_path=str(target), volume_capability=vol.capability, volume_context=vol.attributes),
            timeout=60)  # fmt: skip
        return self.on_host(target)

    def unpublish(self, ch: grpc.Channel, vol: Volume, pod_uid: str) -> None:
        req = csi_pb2.NodeUnpublishVolumeRequest(
            volume_id=vol.handle, target_path=str(self.target(vol, pod_uid))
        )
        csi_pb2_grpc.NodeStub(ch).NodeUnpublishVolume(req, timeout=60)

    def unstage(self, ch: grpc.Channel, vol: Volume) -> None:
        req = csi_pb2.NodeUnstageVolumeRequest(
            volume_id=vol.handle, staging_target_path=str(self.staging(vol))
        )
        csi_pb2_grpc.NodeStub(ch).NodeUnstageVolume(req, timeout=60)


def _bytes(quantity: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity.removesuffix(suffix)) * factor
    return int(quantity)
