"""external-resizer (v1.13) stand-in: a bound PVC of this driver whose requested storage is above
its PV's capacity is expanded.

The claim's status first says so (condition Resizing, `allocatedResources.storage` the new size,
`allocatedResourceStatuses.storage: ControllerResizeInProgress`; Event Resizing), then
ControllerExpandVolume with the volume handle, the new size as required_bytes and the PV's
capability; on success the PV's `spec.capacity.storage` is the size the driver reports, and either
the claim's `status.capacity` too (Event VolumeResizeSuccessful), or, when the driver needs node
expansion, the condition FileSystemResizePending and `NodeResizePending` (Event
FileSystemResizeRequired): kubelet finishes it (NodeExpandVolume) on the node where the volume is
mounted. On failure: Warning VolumeResizeFailed with the driver's error, the size status
ControllerResizeInfeasible (InvalidArgument, OutOfRange, NotFound) or ControllerResizeFailed, and a
retry with back-off.

Not done: controller-expand secrets, VolumeAttributesClass modification (ControllerModifyVolume),
recovery by lowering the request again.
"""

from __future__ import annotations

from typing import Any

import grpc

from nodeenv.kubelet.sidecars import base
from nodeenv.kubelet.sidecars.events import NORMAL, WARNING
from nodeenv.kubelet.sidecars.volumecaps import pv_capability, quantity, to_bytes
from protos import csi_pb2, csi_pb2_grpc

Obj = dict[str, Any]
Rpc = csi_pb2.ControllerServiceCapability.RPC
INFEASIBLE = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.NOT_FOUND)
FS_PENDING = "Waiting for user to (re-)start a pod to finish file system resize of volume on node."


def expand_request(pv: Obj, size: int, multi_writer: bool) -> csi_pb2.ControllerExpandVolumeRequest:
    return csi_pb2.ControllerExpandVolumeRequest(
        volume_id=pv["spec"]["csi"]["volumeHandle"],
        capacity_range=csi_pb2.CapacityRange(required_bytes=size),
        volume_capability=pv_capability(pv, multi_writer),
    )


def condition(kind: str, message: str = "") -> Obj:
    c = {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": base.now_rfc3339()}
    return c | ({"message": message} if message else {})


class Resizer:
    def __init__(self, ctx: base.Context) -> None:
        self.ctx = ctx
        caps = csi_pb2_grpc.ControllerStub(ctx.channel).ControllerGetCapabilities(
            csi_pb2.ControllerGetCapabilitiesRequest(), timeout=ctx.timeout
        )
        self.rpcs = {c.rpc.type for c in caps.capabilities}

    def sync(self) -> None:
        api = self.ctx.client
        pvs = {p["metadata"]["name"]: p for p in api.request("GET", "/api/v1/persistentvolumes")["items"]}
        for pvc in api.request("GET", "/api/v1/persistentvolumeclaims")["items"]:
            pv = pvs.get(pvc["spec"].get("volumeName") or "")
            m = pvc["metadata"]
            key = f"pvc/{m['namespace']}/{m['name']}"
            if pv is None or (pv["spec"].get("csi") or {}).get("driver") != self.ctx.driver:
                continue
            if (pvc.get("status") or {}).get("phase") != "Bound" or not self.ctx.backoff.due(key):
                continue
            want = to_bytes(pvc["spec"]["resources"]["requests"]["storage"])
            if want > to_bytes(pv["spec"]["capacity"]["storage"]):
                if self.resize(pvc, pv, want):
                    self.ctx.backoff.done(key)
                else:
                    self.ctx.backoff.failed(key)

    def _status(self, pvc: Obj, status: Obj) -> None:
        m = pvc["metadata"]
        path = f"/api/v1/namespaces/{m['namespace']}/persistentvolumeclaims/{m['name']}/status"
        self.ctx.client.request("PATCH", path, {"status": status}, base.MERGE)

    def resize(self, pvc: Obj, pv: Obj, size: int) -> bool:
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", **pvc}
        pv_name, driver = pv["metadata"]["name"], self.ctx.driver
        self._status(
            pvc,
            {
                "conditions": [condition("Resizing")],
                "allocatedResources": {"storage": quantity(size)},
                "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
            },
        )
        self.ctx.events.emit(ref, NORMAL, "Resizing", f"External resizer is resizing volume {pv_name}")
        req = expand_request(pv, size, Rpc.SINGLE_NODE_MULTI_WRITER in self.rpcs)
        try:
            reply = csi_pb2_grpc.ControllerStub(self.ctx.channel).ControllerExpandVolume(
                req, timeout=self.ctx.timeout
            )
        except grpc.RpcError as e:
            state = "ControllerResizeInfeasible" if e.code() in INFEASIBLE else "ControllerResizeFailed"
            self._status(pvc, {"conditions": None, "allocatedResourceStatuses": {"storage": state}})
            msg = f'resize volume "{pv_name}" by resizer "{driver}" failed: {base.rpc_error(e)}'
            self.ctx.events.emit(ref, WARNING, "VolumeResizeFailed", msg)
            return False
        new = quantity(reply.capacity_bytes or size)
        self.ctx.client.request(
            "PATCH",
            f"/api/v1/persistentvolumes/{pv_name}",
            {"spec": {"capacity": {"storage": new}}},
            base.MERGE,
        )
        if reply.node_expansion_required:
            self._status(
                pvc,
                {
                    "conditions": [condition("FileSystemResizePending", FS_PENDING)],
                    "allocatedResourceStatuses": {"storage": "NodeResizePending"},
                },
            )
            self.ctx.events.emit(
                ref, NORMAL, "FileSystemResizeRequired", "Require file system resize of volume on node"
            )
        else:
            self._status(
                pvc, {"capacity": {"storage": new}, "conditions": None, "allocatedResourceStatuses": None}
            )
            self.ctx.events.emit(ref, NORMAL, "VolumeResizeSuccessful", "Resize volume succeeded")
        return True


def main(argv: list[str] | None = None) -> int:
    return base.main("csi-resizer", __doc__, lambda driver: f"external-resizer-{driver}", Resizer, argv)


if __name__ == "__main__":
    raise SystemExit(main())
