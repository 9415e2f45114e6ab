"""The snapshot-controller (external-snapshotter's common controller, which a cluster admin installs
with the snapshot CRDs), for dynamically created snapshots:

- a VolumeSnapshot of a bound claim (`spec.source.persistentVolumeClaimName`) gets its finalizers
  (`volumesnapshot-as-source-protection`, `volumesnapshot-bound-protection`) and a
  VolumeSnapshotContent `snapcontent-<uid>` for the claim's CSI volume handle, its class's driver
  and deletionPolicy (the class named, or the driver's default class), with the
  `volumesnapshotcontent-bound-protection` finalizer; the csi-snapshotter sidecar makes the snapshot;
- the content's status (readyToUse, restoreSize, creationTime, error) is copied to the snapshot's
  (`boundVolumeSnapshotContentName`);
- a deleted VolumeSnapshot: with deletionPolicy Delete its content is annotated
  `volumesnapshot-being-deleted` and deleted (the sidecar deletes the snapshot and lets it go), and the
  snapshot's finalizers are removed once the content is gone (at once with Retain).

Not done: pre-provisioned snapshots (`source.volumeSnapshotContentName`), group snapshots, the PVC's
`snapshot-source-protection`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.sidecars.base import MERGE
from nodeenv.kubelet.sidecars.events import WARNING, EventRecorder
from nodeenv.kubelet.sidecars.snapshotter import FINALIZER as CONTENT_FINALIZER
from nodeenv.kubelet.sidecars.volumecaps import quantity

Obj = dict[str, Any]
SNAP = "/apis/snapshot.storage.k8s.io/v1"
FINALIZERS = (
    "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection",
    "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection",
)
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
DEFAULT_CLASS = "snapshot.storage.kubernetes.io/is-default-class"


def vs_path(vs: Obj, sub: str = "") -> str:
    m = vs["metadata"]
    return f"{SNAP}/namespaces/{m['namespace']}/volumesnapshots/{m['name']}" + (f"/{sub}" if sub else "")


def content_for(vs: Obj, pv: Obj, klass: Obj) -> Obj:
    m = vs["metadata"]
    ref = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "name": m["name"],
        "namespace": m["namespace"],
        "uid": m["uid"],
        "resourceVersion": m["resourceVersion"],
    }
    spec = {
        "volumeSnapshotRef": ref,
        "source": {"volumeHandle": pv["spec"]["csi"]["volumeHandle"]},
        "driver": klass["driver"],
        "deletionPolicy": klass["deletionPolicy"],
        "volumeSnapshotClassName": klass["metadata"]["name"],
    }
    meta = {"name": f"snapcontent-{m['uid']}", "finalizers": [CONTENT_FINALIZER]}
    return {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotContent",
        "metadata": meta,
        "spec": spec,
    }


def rfc3339_from_ns(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SnapshotController:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events = EventRecorder(lambda: client, "snapshot-controller")

    def sync(self) -> None:
        api = self.client
        try:
            snaps = api.request("GET", f"{SNAP}/volumesnapshots")["items"]
        except ApiError as e:
            if e.code == 404:
                return  # the snapshot CRDs are not installed
            raise
        contents = {
            c["metadata"]["name"]: c for c in api.request("GET", f"{SNAP}/volumesnapshotcontents")["items"]
        }
        for vs in snaps:
            content = contents.get(f"snapcontent-{vs['metadata']['uid']}")
            if vs["metadata"].get("deletionTimestamp"):
                self.delete(vs, content)
            elif content is None:
                self.create(vs)
            else:
                self.copy_status(vs, content)

    def create(self, vs: Obj) -> None:
        ref = {"kind": "VolumeSnapshot", "apiVersion": "snapshot.storage.k8s.io/v1", **vs}
        claim = (vs["spec"].get("source") or {}).get("persistentVolumeClaimName")
        if not claim:
            return
        ns = vs["metadata"]["namespace"]
        try:
            pvc = self.client.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
        except ApiError as e:
            if e.code != 404:
                raise
            self.events.emit(
                ref,
                WARNING,
                "SnapshotContentCreationFailed",
                f"Failed to create snapshot content with error snapshot controller failed to update "
                f"{ns}/{vs['metadata']['name']} on API server: cannot get claim from snapshot",
            )
            return
        if not pvc["spec"].get("volumeName"):
            return  # the claim is not bound yet
        pv = self.client.request("GET", f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
        klass = self.snapshot_class(vs, pv)
        if klass is None:
            self.events.emit(ref, WARNING, "SnapshotContentCreationFailed", "Failed to get snapshot class")
            return
        meta = {"finalizers": sorted({*(vs["metadata"].get("finalizers") or []), *FINALIZERS})}
        self.client.request("PATCH", vs_path(vs), {"metadata": meta}, MERGE)
        self.client.request("POST", f"{SNAP}/volumesnapshotcontents", content_for(vs, pv, klass))
        status = {
            "boundVolumeSnapshotContentName": f"snapcontent-{vs['metadata']['uid']}",
            "readyToUse": False,
        }
        self.client.request("PATCH", vs_path(vs, "status"), {"status": status}, MERGE)

    def snapshot_class(self, vs: Obj, pv: Obj) -> Obj | None:
        name = vs["spec"].get("volumeSnapshotClassName")
        classes = self.client.request("GET", f"{SNAP}/volumesnapshotclasses")["items"]
        driver = pv["spec"]["csi"]["driver"]
        for c in classes:
            default = (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true"
            if c["metadata"]["name"] == name or (not name and default and c["driver"] == driver):
                return dict(c)
        return None

    def copy_status(self, vs: Obj, content: Obj) -> None:
        cs = content.get("status") or {}
        status: Obj = {
            "boundVolumeSnapshotContentName": content["metadata"]["name"],
            "readyToUse": bool(cs.get("readyToUse")),
        }
        if cs.get("creationTime"):
            status["creationTime"] = rfc3339_from_ns(int(cs["creationTime"]))
        if cs.get("restoreSize") is not None:
            status["restoreSize"] = quantity(int(cs["restoreSize"]))
        if cs.get("error"):
            status["error"] = cs["error"]
        old = vs.get("status") or {}
        if any(old.get(k) != v for k, v in status.items()):
            self.client.request("PATCH", vs_path(vs, "status"), {"status": status}, MERGE)

    def delete(self, vs: Obj, content: Obj | None) -> None:
        if content is not None and content["spec"].get("deletionPolicy") == "Delete":
            if not content["metadata"].get("deletionTimestamp"):
                path = f"{SNAP}/volumesnapshotcontents/{content['metadata']['name']}"
                self.client.request(
                    "PATCH", path, {"metadata": {"annotations": {BEING_DELETED: "yes"}}}, MERGE
                )
                self.client.request("DELETE", path)
            return  # its finalizers go once the content is gone
        have = vs["metadata"].get("finalizers") or []
        rest = [f for f in have if f not in FINALIZERS]
        if rest != have:
            meta = {"finalizers": rest or None, "resourceVersion": vs["metadata"]["resourceVersion"]}
            self.client.request("PATCH", vs_path(vs), {"metadata": meta}, MERGE)
