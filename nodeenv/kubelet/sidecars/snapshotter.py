"""csi-snapshotter (external-snapshotter v8 sidecar) stand-in: VolumeSnapshotContents of this driver
get a snapshot, and lose it when deleted.

A content with `spec.source.volumeHandle` and no ready snapshot yet: CreateSnapshot named
`snapshot-<VolumeSnapshot uid>` (idempotent: asked again until the driver says readyToUse) with
the VolumeSnapshotClass's parameters without the reserved `csi.storage.k8s.io/` keys (plus the
snapshot's and content's names with `--extra-create-metadata`); `status` {snapshotHandle,
creationTime (ns), readyToUse, restoreSize} written, or `status.error` and a Warning
SnapshotCreationFailed Event. A content being deleted with deletionPolicy Delete: DeleteSnapshot,
then its `volumesnapshotcontent-bound-protection` finalizer removed (Retain: only the finalizer).

The VolumeSnapshot side (a content for each VolumeSnapshot, their status) is the snapshot-controller's
job, which the runner plays (nodeenv/kubelet/storage/snapshotcontroller.py).
Not done: snapshot secrets, pre-provisioned contents (`source.snapshotHandle`), group snapshots.
"""

from __future__ import annotations

import argparse
from typing import Any

import grpc

from nodeenv.kubelet.sidecars import base
from nodeenv.kubelet.sidecars.events import WARNING
from protos import csi_pb2, csi_pb2_grpc

Obj = dict[str, Any]
SNAP = "/apis/snapshot.storage.k8s.io/v1"
PREFIX = "csi.storage.k8s.io/"
FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"


def snapshot_request(
    content: Obj, klass: Obj | None, extra_metadata: bool, prefix: str
) -> csi_pb2.CreateSnapshotRequest:
    spec = content["spec"]
    ref = spec["volumeSnapshotRef"]
    params = {k: v for k, v in ((klass or {}).get("parameters") or {}).items() if not k.startswith(PREFIX)}
    if extra_metadata:
        params |= {
            PREFIX + "volumesnapshot/name": ref["name"],
            PREFIX + "volumesnapshot/namespace": ref["namespace"],
            PREFIX + "volumesnapshotcontent/name": content["metadata"]["name"],
        }
    return csi_pb2.CreateSnapshotRequest(
        name=f"{prefix}-{ref['uid']}", source_volume_id=spec["source"]["volumeHandle"], parameters=params
    )


def snapshot_status(snap: csi_pb2.Snapshot) -> Obj:
    created = snap.creation_time.seconds * 10**9 + snap.creation_time.nanos
    return {
        "snapshotHandle": snap.snapshot_id,
        "creationTime": created,
        "readyToUse": snap.ready_to_use,
        "restoreSize": snap.size_bytes,
        "error": None,
    }


class Snapshotter:
    def __init__(self, ctx: base.Context) -> None:
        self.ctx = ctx

    def sync(self) -> None:
        api = self.ctx.client
        for content in api.request("GET", f"{SNAP}/volumesnapshotcontents")["items"]:
            key = f"content/{content['metadata']['name']}"
            if content["spec"].get("driver") != self.ctx.driver or not self.ctx.backoff.due(key):
                continue
            if content["metadata"].get("deletionTimestamp"):
                done = self.delete(content)
            elif "volumeHandle" in content["spec"].get("source", {}) and not (
                content.get("status") or {}
            ).get("readyToUse"):
                done = self.create(content)
            else:
                continue
            self.ctx.backoff.done(key) if done else self.ctx.backoff.failed(key)

    def _path(self, content: Obj) -> str:
        return f"{SNAP}/volumesnapshotcontents/{content['metadata']['name']}"

    def create(self, content: Obj) -> bool:
        api = self.ctx.client
        klass = None
        if content["spec"].get("volumeSnapshotClassName"):
            klass = api.request(
                "GET", f"{SNAP}/volumesnapshotclasses/{content['spec']['volumeSnapshotClassName']}"
            )
        req = snapshot_request(
            content, klass, self.ctx.args.extra_create_metadata, self.ctx.args.snapshot_name_prefix
        )
        try:
            snap = (
                csi_pb2_grpc.ControllerStub(self.ctx.channel)
                .CreateSnapshot(req, timeout=self.ctx.timeout)
                .snapshot
            )
        except grpc.RpcError as e:
            msg = f"Failed to check and update snapshot content: {base.rpc_error(e)}"
            api.request(
                "PATCH",
                self._path(content) + "/status",
                {"status": {"error": {"time": base.now_rfc3339(), "message": msg}}},
                base.MERGE,
            )
            ref = {"kind": "VolumeSnapshotContent", "apiVersion": "snapshot.storage.k8s.io/v1", **content}
            self.ctx.events.emit(
                ref, WARNING, "SnapshotCreationFailed", f"Failed to create snapshot: {base.rpc_error(e)}"
            )
            return False
        api.request("PATCH", self._path(content) + "/status", {"status": snapshot_status(snap)}, base.MERGE)
        return bool(snap.ready_to_use)

    def delete(self, content: Obj) -> bool:
        handle = (content.get("status") or {}).get("snapshotHandle")
        if content["spec"].get("deletionPolicy") == "Delete" and handle:
            try:
                csi_pb2_grpc.ControllerStub(self.ctx.channel).DeleteSnapshot(
                    csi_pb2.DeleteSnapshotRequest(snapshot_id=handle), timeout=self.ctx.timeout
                )
            except grpc.RpcError as e:
                ref = {"kind": "VolumeSnapshotContent", "apiVersion": "snapshot.storage.k8s.io/v1", **content}
                self.ctx.events.emit(
                    ref, WARNING, "SnapshotDeleteError", f"Failed to delete snapshot: {base.rpc_error(e)}"
                )
                return False
        base.remove_finalizer(self.ctx.client, self._path(content), content, FINALIZER)
        return True


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--extra-create-metadata", action="store_true")
    p.add_argument("--snapshot-name-prefix", default="snapshot")


def main(argv: list[str] | None = None) -> int:
    return base.main(
        "csi-snapshotter", __doc__, lambda d: f"external-snapshotter-leader-{d}", Snapshotter, argv, _flags
    )


if __name__ == "__main__":
    raise SystemExit(main())
