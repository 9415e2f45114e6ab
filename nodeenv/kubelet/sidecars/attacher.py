"""external-attacher (v4) stand-in: VolumeAttachments of this driver attached and detached.

A VolumeAttachment naming this driver (`spec.attacher`) and a PV: its finalizer
`external-attacher/<driver>` added (and the same on the PV, while an attachment uses it), then
ControllerPublishVolume with the volume handle, the node id the node's CSINode holds for the driver
(the Node's `csi.volume.kubernetes.io/nodeid` annotation otherwise), the PV's capability and
readOnly, and its volume attributes as the volume context; then `status.attached: true` with the
publish context as `attachmentMetadata`, or `attached: false` and `attachError` {time, message}.
Being deleted: ControllerUnpublishVolume, `attached: false`, the finalizer removed (and the PV's once
no attachment uses it); `detachError` on failure. Failures are retried with back-off.

Not done: controller-publish secrets, inline (ephemeral) volume specs, ListVolumes reconciliation.
"""

from __future__ import annotations

import json
import re
from typing import Any

import grpc

from nodeenv.kubelet.apiclient import ApiError
from nodeenv.kubelet.sidecars import base
from nodeenv.kubelet.sidecars.volumecaps import pv_capability
from protos import csi_pb2, csi_pb2_grpc

Obj = dict[str, Any]
VA = "/apis/storage.k8s.io/v1/volumeattachments"
Rpc = csi_pb2.ControllerServiceCapability.RPC


def finalizer(driver: str) -> str:
    return "external-attacher/" + re.sub(r"[^a-zA-Z0-9-]", "-", driver)


def publish_request(pv: Obj, node_id: str, multi_writer: bool) -> csi_pb2.ControllerPublishVolumeRequest:
    csi = pv["spec"]["csi"]
    return csi_pb2.ControllerPublishVolumeRequest(
        volume_id=csi["volumeHandle"],
        node_id=node_id,
        volume_capability=pv_capability(pv, multi_writer),
        readonly=bool(csi.get("readOnly")),
        volume_context=csi.get("volumeAttributes") or {},
    )


class Attacher:
    def __init__(self, ctx: base.Context) -> None:
        self.ctx = ctx
        self.finalizer = finalizer(ctx.driver)
        caps = csi_pb2_grpc.ControllerStub(ctx.channel).ControllerGetCapabilities(
            csi_pb2.ControllerGetCapabilitiesRequest(), timeout=ctx.timeout
        )
        self.multi_writer = Rpc.SINGLE_NODE_MULTI_WRITER in {c.rpc.type for c in caps.capabilities}

    def sync(self) -> None:
        vas = [
            v for v in self.ctx.client.request("GET", VA)["items"] if v["spec"]["attacher"] == self.ctx.driver
        ]
        for va in vas:
            key = f"va/{va['metadata']['name']}"
            if not self.ctx.backoff.due(key) or not va["spec"]["source"].get("persistentVolumeName"):
                continue
            try:
                done = self.detach(va, vas) if va["metadata"].get("deletionTimestamp") else self.attach(va)
            except ApiError as e:
                base.log.warning("volumeattachment %s: %s", va["metadata"]["name"], e)
                done = False
            if done:
                self.ctx.backoff.done(key)
            else:
                self.ctx.backoff.failed(key)

    def node_id(self, node: str) -> str:
        api = self.ctx.client
        try:
            cn = api.request("GET", f"/apis/storage.k8s.io/v1/csinodes/{node}")
            for d in cn["spec"].get("drivers") or []:
                if d["name"] == self.ctx.driver:
                    return str(d["nodeID"])
        except ApiError as e:
            if e.code != 404:
                raise
        ann = (api.request("GET", f"/api/v1/nodes/{node}")["metadata"].get("annotations") or {}).get(
            "csi.volume.kubernetes.io/nodeid", "{}"
        )
        found = json.loads(ann).get(self.ctx.driver)
        if not found:
            raise LookupError(f"CSINode {node} does not contain driver {self.ctx.driver}")
        return str(found)

    def attach(self, va: Obj) -> bool:
        if (va.get("status") or {}).get("attached"):
            return True
        name, pv_name = va["metadata"]["name"], va["spec"]["source"]["persistentVolumeName"]
        api = self.ctx.client
        base.add_finalizer(api, f"{VA}/{name}", va, self.finalizer)
        pv = api.request("GET", f"/api/v1/persistentvolumes/{pv_name}")
        base.add_finalizer(api, f"/api/v1/persistentvolumes/{pv_name}", pv, self.finalizer)
        try:
            req = publish_request(pv, self.node_id(va["spec"]["nodeName"]), self.multi_writer)
            reply = csi_pb2_grpc.ControllerStub(self.ctx.channel).ControllerPublishVolume(
                req, timeout=self.ctx.timeout
            )
        except (grpc.RpcError, LookupError) as e:
            msg = base.rpc_error(e) if isinstance(e, grpc.RpcError) else str(e)
            self._status(
                name, {"attached": False, "attachError": {"time": base.now_rfc3339(), "message": msg}}
            )
            return False
        self._status(
            name,
            {
                "attached": True,
                "attachmentMetadata": dict(reply.publish_context) or None,
                "attachError": None,
            },
        )
        return True

    def detach(self, va: Obj, vas: list[Obj]) -> bool:
        name, pv_name = va["metadata"]["name"], va["spec"]["source"]["persistentVolumeName"]
        if self.finalizer not in (va["metadata"].get("finalizers") or []):
            return True
        api = self.ctx.client
        pv = api.request("GET", f"/api/v1/persistentvolumes/{pv_name}")
        try:
            req = csi_pb2.ControllerUnpublishVolumeRequest(
                volume_id=pv["spec"]["csi"]["volumeHandle"], node_id=self.node_id(va["spec"]["nodeName"])
            )
            csi_pb2_grpc.ControllerStub(self.ctx.channel).ControllerUnpublishVolume(
                req, timeout=self.ctx.timeout
            )
        except (grpc.RpcError, LookupError) as e:
            msg = base.rpc_error(e) if isinstance(e, grpc.RpcError) else str(e)
            self._status(name, {"detachError": {"time": base.now_rfc3339(), "message": msg}})
            return False
        self._status(name, {"attached": False, "detachError": None, "attachmentMetadata": None})
        base.remove_finalizer(api, f"{VA}/{name}", api.request("GET", f"{VA}/{name}"), self.finalizer)
        others = [
            v for v in vas if v is not va and v["spec"]["source"].get("persistentVolumeName") == pv_name
        ]
        if not others:
            base.remove_finalizer(api, f"/api/v1/persistentvolumes/{pv_name}", pv, self.finalizer)
        return True

    def _status(self, name: str, status: Obj) -> None:
        self.ctx.client.request("PATCH", f"{VA}/{name}/status", {"status": status}, base.MERGE)


def main(argv: list[str] | None = None) -> int:
    return base.main(
        "csi-attacher", __doc__, lambda driver: f"external-attacher-leader-{driver}", Attacher, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
