"""The spec's E2E database pod, its storage half: a LightningStor volume written from the database pod
(a pod ADDed through the node's installed plugin), the pod deleted and started again, the data read
back there; everything removed afterwards.

On a cluster the pod is started again on another node, as the scheduler does when its node is
drained: kubelet on node A unpublishes and unstages through A's plugin, the external-attacher's
ControllerUnpublishVolume detaches it from A; while it was still on A, node B was refused
(FAILED_PRECONDITION: a ReadWriteOnce volume is attached to one node); then ControllerPublishVolume
to B and kubelet on B stages and publishes through B's own plugin (found through B's registration
directory). On one node the pod is restarted there (unpublish, unstage, restage, publish)."""

from __future__ import annotations

import subprocess

import grpc

from csi.settings import DRIVER_NAME
from nodeenv.cni_component import installed_runtime
from nodeenv.daemons import run_checked
from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios.csi import CAP, GIB, Csi
from protos import csi_pb2

POD_NS = "sbx-e2e-db"
NAMESPACE, POD = "sandbox-db", "postgres-0"
PVC = "sandbox-e2e-db"
ROW = "id=1 name=plasmacloud"


def _in_pod(script: str) -> str:
    return run_checked(["ip", "netns", "exec", POD_NS, "sh", "-c", script]).strip()


def _target(csi: Csi, volume_id: str, generation: int) -> str:
    """The pod's path for the volume; a pod started again has a new UID, so a new path."""
    _, target = csi.paths(volume_id)
    return target if generation == 0 else target.replace("/volumes/", f"-{generation}/volumes/", 1)


def _mount(csi: Csi, volume_id: str, target: str) -> None:
    """The external-attacher's ControllerPublishVolume to the node, then the node's kubelet."""
    staging, _ = csi.paths(volume_id)
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
    csi.node.NodePublishVolume(
        csi_pb2.NodePublishVolumeRequest(
            volume_id=volume_id, staging_target_path=staging, target_path=target,
            volume_capability=CAP, publish_context=ctx,
        )
    )  # fmt: skip


def _unmount(csi: Csi, volume_id: str, target: str, detach: bool) -> None:
    """kubelet's calls for a pod deleted on the node; the attacher's detach when it leaves the node."""
    staging, _ = csi.paths(volume_id)
    csi.node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target))
    csi.node.NodeUnstageVolume(
        csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging)
    )
    if detach:
        csi.controller.ControllerUnpublishVolume(
            csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=csi.node_id)
        )


class DatabasePod:
    """The database pod's network namespace, ADDed on a node through its installed plugin."""

    def __init__(self, scn: Scenario) -> None:
        self.scn, self.place, self.result = scn, scn.at(0), dict[str, object]()
        run_checked(["ip", "netns", "add", POD_NS])
        scn.defer(lambda: subprocess.run(["ip", "netns", "del", POD_NS], check=False))
        scn.defer(self.delete)

    def start(self, place: Place, generation: int) -> str:
        self.place, cid = place, f"sbxe2edb{generation}".ljust(32, "0")
        call = installed_runtime(place.env, chained=False).add(cid, f"/run/netns/{POD_NS}", args=self._args)
        if call.rc:
            raise RuntimeError(f"ADD {POD} on {place.name}: {call.out} {call.stderr}")
        self.result = {"cid": cid, **call.out}
        return str(call.out["ips"][0]["address"]).split("/")[0]  # type: ignore[index]

    def delete(self) -> None:
        if self.result:
            cid, prev = str(self.result.pop("cid")), self.result
            self.result = {}
            call = installed_runtime(self.place.env, chained=False).delete(
                cid, f"/run/netns/{POD_NS}", prev, args=self._args
            )
            if call.rc:
                raise RuntimeError(f"DEL {POD} on {self.place.name}: {call.out}")

    @property
    def _args(self) -> str:
        return f"IgnoreUnknown=1;K8S_POD_NAMESPACE={NAMESPACE};K8S_POD_NAME={POD}"


def run(scn: Scenario) -> None:
    a, b = scn.at(0), scn.at(1)
    moves = a.name != b.name  # on one node: restarted there
    csi_a = Csi(a.env)  # node A's plugin serves the Controller (the controller Deployment's) too
    csi_b = Csi(b.env, controller=csi_a) if moves else csi_a
    mounted: list[tuple[Csi, str]] = []
    with scn.step(f"e2e: database pod's volume on {DRIVER_NAME}, written from the pod", on=a.name):
        vol = csi_a.controller.CreateVolume(
            csi_pb2.CreateVolumeRequest(
                name=PVC, capacity_range=csi_pb2.CapacityRange(required_bytes=GIB), volume_capabilities=[CAP],
                parameters={"type": "ssd", "replication": "3"},
            )
        ).volume  # fmt: skip
        scn.defer(lambda: _teardown(csi_a, vol.volume_id, mounted))
        pod = DatabasePod(scn)
        pod.start(a, 0)
        target = _target(csi_a, vol.volume_id, 0)
        _mount(csi_a, vol.volume_id, target)
        mounted.append((csi_a, target))
        _in_pod(f"mkdir -p {target}/pgdata && echo '{ROW}' > {target}/pgdata/table && sync")
    if moves:
        with scn.step(
            f"e2e: while on {a.name}, {b.name} is refused the volume (FAILED_PRECONDITION)", on=b.name
        ):
            _refused(csi_b, vol.volume_id, a.name)
    moved = f"deleted on {a.name}, started on {b.name}" if moves else "restarted"
    with scn.step(f"e2e: database pod {moved}: the data is there", on=scn.where(a, b)):
        pod.delete()
        _unmount(csi_a, vol.volume_id, target, detach=moves)
        mounted.clear()
        pod.start(b, 1)
        target = _target(csi_b, vol.volume_id, 1)
        _mount(csi_b, vol.volume_id, target)
        mounted.append((csi_b, target))
        got = _in_pod(f"cat {target}/pgdata/table")
        if got != ROW:
            raise RuntimeError(f"after the move the table reads {got!r}")


def _refused(csi: Csi, volume_id: str, holder: str) -> None:
    try:
        csi.controller.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(
                volume_id=volume_id, node_id=csi.node_id, volume_capability=CAP
            )
        )
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.FAILED_PRECONDITION or holder not in (e.details() or ""):
            raise RuntimeError(f"refused with {e.code()}: {e.details()} (not naming {holder})") from None
        return
    raise RuntimeError(f"{csi.node_id} was given a ReadWriteOnce volume attached to {holder}")


def _teardown(controller: Csi, volume_id: str, mounted: list[tuple[Csi, str]]) -> None:
    """Unmount where it is mounted now, detach, delete (the CSI spec makes repeats no-ops)."""
    for csi, target in mounted:
        _unmount(csi, volume_id, target, detach=True)
    controller.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume_id))
