"""The spec's E2E database pod, its storage half: a LightningStor volume written from a pod, the pod
restarted the way kubelet restarts it (NodeUnpublish, NodeUnstage, then stage and publish again to a
new pod path) and the data read back there; everything removed afterwards."""

from __future__ import annotations

import subprocess

from csi.settings import DRIVER_NAME
from nodeenv.daemons import run_checked
from nodeenv.scenario import Scenario
from nodeenv.scenarios.csi import CAP, GIB, Csi
from protos import csi_pb2

POD_NS = "sbx-e2e-db"
PVC = "sandbox-e2e-db"
ROW = "id=1 name=plasmacloud"


def _in_pod(script: str) -> str:
    return run_checked(["ip", "netns", "exec", POD_NS, "sh", "-c", script]).strip()


def _restart(csi: Csi, volume_id: str, old_target: str) -> str:
    """kubelet's calls for a pod deleted and recreated on this node: the volume leaves the node's
    mounts entirely, then is staged and published again (a new pod UID: a new target path)."""
    staging, _ = csi.paths(volume_id)
    csi.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=old_target)
    )
    csi.node.NodeUnstageVolume(
        csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging)
    )
    ctx = csi.controller.ControllerPublishVolume(
        csi_pb2.ControllerPublishVolumeRequest(
            volume_id=volume_id, node_id=csi.node_id, volume_capability=CAP
        )
    ).publish_context
    csi.node.NodeStageVolume(
        csi_pb2.NodeStageVolumeRequest(
            volume_id=volume_id, staging_target_path=staging, volume_capability=CAP, publish_context=ctx
        )
    )
    target = f"{old_target.rsplit('/volumes/', 1)[0]}-restarted/volumes/kubernetes.io~csi/{volume_id}/mount"
    csi.node.NodePublishVolume(
        csi_pb2.NodePublishVolumeRequest(
            volume_id=volume_id, staging_target_path=staging, target_path=target,
            volume_capability=CAP, publish_context=ctx,
        )
    )  # fmt: skip
    return target


def run(scn: Scenario) -> None:
    csi = Csi(scn.env)
    with scn.step(f"e2e: database volume on {DRIVER_NAME}, written from its pod"):
        vol = csi.controller.CreateVolume(
            csi_pb2.CreateVolumeRequest(
                name=PVC, capacity_range=csi_pb2.CapacityRange(required_bytes=GIB), volume_capabilities=[CAP],
                parameters={"type": "ssd", "replication": "3"},
            )
        ).volume  # fmt: skip
        target = csi.attach_and_mount(vol.volume_id)
        current = [target]
        scn.defer(lambda: _teardown(csi, vol.volume_id, current[0]))
        run_checked(["ip", "netns", "add", POD_NS])
        scn.defer(lambda: subprocess.run(["ip", "netns", "del", POD_NS], check=False))
        _in_pod(f"mkdir -p {target}/pgdata && echo '{ROW}' > {target}/pgdata/table && sync")
    with scn.step("e2e: database pod restarted (unpublish, unstage, restage, publish): data still there"):
        current[0] = _restart(csi, vol.volume_id, target)
        got = _in_pod(f"cat {current[0]}/pgdata/table")
        if got != ROW:
            raise RuntimeError(f"after the restart the table reads {got!r}")


def _teardown(csi: Csi, volume_id: str, target: str) -> None:
    """Unpublish the restarted pod's path, then the usual teardown (its NodeUnpublish of the first
    path is a no-op by the CSI spec)."""
    csi.node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target))
    csi.teardown(volume_id)
