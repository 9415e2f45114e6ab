"""LightningStor CSI in the sandbox: a 1 GiB volume published to the node, staged and published
to a pod path, a file written and read from a pod network namespace, online expansion, a
snapshot restored to a new volume that has the file, and everything torn down again. On a cluster
this runs on one node, through that node's plugin (found through its registration directory), its
volumes in the cluster's LightningStor (LIGHTNINGSTOR_DIR names where the double keeps them)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc

from csi import loopdev
from csi.settings import DRIVER_NAME
from nodeenv.csi_registrar import kubelet_endpoint
from nodeenv.daemons import run_checked
from nodeenv.scenario import Scenario
from protos import csi_pb2, csi_pb2_grpc

GIB = 1 << 30
POD_NS = "sbx-csi-pod"
PVC, RESTORED, SNAP = "sandbox-pvc", "sandbox-pvc-restored", "sandbox-snap"
CAP = csi_pb2.VolumeCapability(
    mount=csi_pb2.VolumeCapability.MountVolume(),  # fs_type: the driver's default
    access_mode=csi_pb2.VolumeCapability.AccessMode(
        mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    ),
)


class Csi:
    """The sidecars' and kubelet's side of the calls, with kubelet-like paths in the run dir: the
    Controller service of the node `controller` names (the node's own by default), the Node service
    and kubelet paths of the node `env` names."""

    def __init__(self, env: dict[str, str], controller: Csi | None = None) -> None:
        if controller is None:
            self.channel = grpc.insecure_channel(env["CSI_CONTROLLER_ENDPOINT"])
            self.controller = csi_pb2_grpc.ControllerStub(self.channel)
        else:
            self.channel, self.controller = controller.channel, controller.controller
        # kubelet's way to the Node service: the plugin registration directory, nothing else
        node_endpoint = kubelet_endpoint(Path(env["CSI_PLUGINS_REGISTRY"]), DRIVER_NAME)
        self.node = csi_pb2_grpc.NodeStub(grpc.insecure_channel(node_endpoint))
        self.node_id = env["CSI_NODE_ID"]
        self.kubelet = Path(env["CSI_KUBELET_DIR"])

    def paths(self, volume_id: str) -> tuple[str, str]:
        staging = self.kubelet / "plugins/kubernetes.io/csi/stor.plasmacloud.io" / volume_id / "globalmount"
        pod = self.kubelet / "pods" / str(uuid.uuid5(uuid.NAMESPACE_OID, volume_id))
        staging.mkdir(parents=True, exist_ok=True)
        return str(staging), str(pod / "volumes/kubernetes.io~csi" / volume_id / "mount")

    def attach_and_mount(self, volume_id: str) -> str:
        ctx = self.controller.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(
                volume_id=volume_id, node_id=self.node_id, volume_capability=CAP
            )
        ).publish_context
        staging, target = self.paths(volume_id)
        self.node.NodeStageVolume(
            csi_pb2.NodeStageVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, volume_capability=CAP, publish_context=ctx
            )
        )
        self.node.NodePublishVolume(
            csi_pb2.NodePublishVolumeRequest(
                volume_id=volume_id,
                staging_target_path=staging,
                target_path=target,
                volume_capability=CAP,
                publish_context=ctx,
            )
        )
        return target

    def teardown(self, volume_id: str) -> None:
        staging, target = self.paths(volume_id)
        self.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target)
        )
        self.node.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging)
        )
        self.controller.ControllerUnpublishVolume(
            csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=self.node_id)
        )
        self.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume_id))


def _in_pod(script: str) -> str:
    return run_checked(["ip", "netns", "exec", POD_NS, "sh", "-c", script]).strip()


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def wrapper() -> None:
        if not done:
            done.append(True)
            fn()

    wrapper.__name__ = getattr(fn, "__name__", "cleanup")
    return wrapper


def run(scn: Scenario) -> None:
    place = scn.at(0)
    env, on = place.env, place.name
    csi = Csi(env)
    c = csi.controller
    with scn.step("csi: create a 1 GiB volume", on=on):
        req = csi_pb2.CreateVolumeRequest(
            name=PVC,
            capacity_range=csi_pb2.CapacityRange(required_bytes=GIB),
            volume_capabilities=[CAP],
            parameters={"type": "ssd", "replication": "3", "org_id": "org-123", "project_id": "proj-456"},
        )
        vol = c.CreateVolume(req).volume
        teardown_vol = _once(lambda: csi.teardown(vol.volume_id))
        scn.defer(teardown_vol)
    with scn.step("csi: publish to the node, stage and publish to a pod path", on=on):
        target = csi.attach_and_mount(vol.volume_id)
    with scn.step("csi: write and read back a file from a pod netns", on=on):
        run_checked(["ip", "netns", "add", POD_NS])
        scn.defer(lambda: subprocess.run(["ip", "netns", "del", POD_NS], check=False))
        out = _in_pod(f"echo written-in-a-pod > {target}/hello.txt && sync && cat {target}/hello.txt")
        if out != "written-in-a-pod":
            raise RuntimeError(f"read back {out!r}")
    with scn.step("csi: expand online to 2 GiB", on=on):
        _expand(csi, vol.volume_id, target)
    with scn.step("csi: snapshot the volume", on=on):
        snap = c.CreateSnapshot(
            csi_pb2.CreateSnapshotRequest(name=SNAP, source_volume_id=vol.volume_id)
        ).snapshot
        scn.defer(lambda: c.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id)))
    with scn.step("csi: restore the snapshot to a new volume and read the file there", on=on):
        teardown_vol2 = _restore_and_read(scn, csi, snap.snapshot_id)
    with scn.step("csi: tear everything down", on=on):
        teardown_vol2()
        teardown_vol()
        c.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
        stores = [env["CSI_STATE_DIR"], env.get("LIGHTNINGSTOR_DIR", "")]
        left = [
            d for store in filter(None, stores) for d in loopdev.backed_by_dir(Path(store), leaving=False)
        ]
        listed = c.ListVolumes(csi_pb2.ListVolumesRequest()).entries
        if left or listed or os.path.exists(target):
            raise RuntimeError(f"left behind: loops {left}, volumes {len(listed)}, target {target}")


def _restore_and_read(scn: Scenario, csi: Csi, snapshot_id: str) -> Callable[[], None]:
    restore = csi_pb2.CreateVolumeRequest(
        name=RESTORED, capacity_range=csi_pb2.CapacityRange(required_bytes=2 * GIB), volume_capabilities=[CAP]
    )
    restore.volume_content_source.snapshot.snapshot_id = snapshot_id
    vol = csi.controller.CreateVolume(restore).volume
    teardown = _once(lambda: csi.teardown(vol.volume_id))
    scn.defer(teardown)
    target = csi.attach_and_mount(vol.volume_id)
    if _in_pod(f"cat {target}/hello.txt") != "written-in-a-pod":
        raise RuntimeError("the restored volume lacks the file")
    return teardown


def _expand(csi: Csi, volume_id: str, target: str) -> None:
    before = os.statvfs(target)
    exp = csi.controller.ControllerExpandVolume(
        csi_pb2.ControllerExpandVolumeRequest(
            volume_id=volume_id, capacity_range=csi_pb2.CapacityRange(required_bytes=2 * GIB)
        )
    )
    if exp.node_expansion_required:
        csi.node.NodeExpandVolume(
            csi_pb2.NodeExpandVolumeRequest(volume_id=volume_id, volume_path=target, volume_capability=CAP)
        )
    after = os.statvfs(target)
    if after.f_blocks * after.f_frsize <= before.f_blocks * before.f_frsize + GIB // 2:
        raise RuntimeError(f"filesystem did not grow: {before.f_blocks} -> {after.f_blocks} blocks")
