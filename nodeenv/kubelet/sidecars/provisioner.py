"""external-provisioner (v5) stand-in: PVCs of this driver's StorageClasses get a volume and a PV.

A PVC is provisioned when the PV controller has named this driver in its
`volume.kubernetes.io/storage-provisioner` annotation, it is not bound, and (for a
WaitForFirstConsumer class) the scheduler has set `volume.kubernetes.io/selected-node`:
CreateVolume named `pvc-<PVC uid>`, the class's parameters without the reserved
`csi.storage.k8s.io/` keys (an unknown reserved key is an error) plus, with
`--extra-create-metadata`, the PVC's name and namespace and the PV's name; the capability from the
PVC's access modes and volumeMode, the class's fstype (or `--default-fstype`) and mountOptions; with
the Topology feature gate and a driver with VOLUME_ACCESSIBILITY_CONSTRAINTS, the selected node's
topology (WaitForFirstConsumer) or every registered node's (Immediate), from the CSINode topology
keys and the Nodes' labels. Then the PV: `pv.kubernetes.io/provisioned-by`, the provisioner's
finalizer, claimRef, the class's reclaimPolicy, the csi source with the volume context and
`storage.kubernetes.io/csiProvisionerIdentity`, nodeAffinity from the accessible topology. Events on
the PVC: Provisioning, ProvisioningSucceeded, ProvisioningFailed (Warning, the driver's gRPC error).

A PV it provisioned whose claim is gone (Released) or that is being deleted, with reclaimPolicy
Delete: DeleteVolume, then the finalizer removed and the PV deleted (VolumeFailedDelete on error).

Not done: provisioning secrets (the overlay's classes name none), data sources (clones, restores),
capacity tracking, VolumeAttributesClass parameters, rescheduling (dropping selected-node) after a
final error.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import grpc

from nodeenv.kubelet.apiclient import ApiError
from nodeenv.kubelet.sidecars import base
from nodeenv.kubelet.sidecars.events import NORMAL, WARNING
from nodeenv.kubelet.sidecars.volumecaps import capability, quantity, to_bytes
from protos import csi_pb2, csi_pb2_grpc

Obj = dict[str, Any]
PREFIX = "csi.storage.k8s.io/"
RESERVED = {PREFIX + k for k in ("fstype",)} | {
    f"{PREFIX}{op}-secret-{part}"
    for op in (
        "provisioner",
        "controller-publish",
        "node-stage",
        "node-publish",
        "controller-expand",
        "node-expand",
        "controller-modify",
    )
    for part in ("name", "namespace")
}
ANN_PROVISIONER = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"
IDENTITY_KEY = "storage.kubernetes.io/csiProvisionerIdentity"
Rpc = csi_pb2.ControllerServiceCapability.RPC


class ProvisionError(Exception):
    pass


def parameters(sc: Obj, pvc: Obj, pv_name: str, extra_metadata: bool) -> dict[str, str]:
    params = dict(sc.get("parameters") or {})
    unknown = sorted(k for k in params if k.startswith(PREFIX) and k not in RESERVED)
    if unknown:
        raise ProvisionError(f'found unknown parameter key "{unknown[0]}" with reserved namespace {PREFIX}')
    out = {k: v for k, v in params.items() if not k.startswith(PREFIX)}
    if extra_metadata:
        m = pvc["metadata"]
        out |= {
            PREFIX + "pvc/name": m["name"],
            PREFIX + "pvc/namespace": m["namespace"],
            PREFIX + "pv/name": pv_name,
        }
    return out


def create_request(
    pvc: Obj,
    sc: Obj,
    *,
    default_fstype: str,
    extra_metadata: bool,
    multi_writer: bool,
    topology: csi_pb2.TopologyRequirement | None,
) -> csi_pb2.CreateVolumeRequest:
    """The CreateVolumeRequest external-provisioner makes for the claim."""
    spec, name = pvc["spec"], f"pvc-{pvc['metadata']['uid']}"
    fs = (sc.get("parameters") or {}).get(PREFIX + "fstype") or default_fstype
    cap = capability(
        spec.get("accessModes") or [],
        spec.get("volumeMode", "Filesystem"),
        fs,
        sc.get("mountOptions") or [],
        multi_writer,
    )
    req = csi_pb2.CreateVolumeRequest(
        name=name,
        volume_capabilities=[cap],
        parameters=parameters(sc, pvc, name, extra_metadata),
        capacity_range=csi_pb2.CapacityRange(
            required_bytes=to_bytes(spec["resources"]["requests"]["storage"])
        ),
    )
    if topology is not None:
        req.accessibility_requirements.CopyFrom(topology)
    return req


def pv_object(
    pvc: Obj, sc: Obj, req: csi_pb2.CreateVolumeRequest, vol: csi_pb2.Volume, driver: str, identity: str
) -> Obj:
    m, spec = pvc["metadata"], pvc["spec"]
    cap = req.volume_capabilities[0]
    size = vol.capacity_bytes or req.capacity_range.required_bytes
    pv_spec: Obj = {
        "accessModes": spec.get("accessModes") or [],
        "capacity": {"storage": quantity(size)},
        "claimRef": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": m["namespace"],
            "name": m["name"],
            "uid": m["uid"],
            "resourceVersion": m.get("resourceVersion", ""),
        },
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "storageClassName": sc["metadata"]["name"],
        "volumeMode": spec.get("volumeMode", "Filesystem"),
        "csi": {
            "driver": driver,
            "volumeHandle": vol.volume_id,
            "volumeAttributes": {**dict(vol.volume_context), IDENTITY_KEY: identity},
        },
    }
    if cap.HasField("mount") and cap.mount.fs_type:
        pv_spec["csi"]["fsType"] = cap.mount.fs_type
    if sc.get("mountOptions"):
        pv_spec["mountOptions"] = sc["mountOptions"]
    terms = [
        {
            "matchExpressions": [
                {"key": k, "operator": "In", "values": [v]} for k, v in sorted(t.segments.items())
            ]
        }
        for t in vol.accessible_topology
    ]
    if terms:
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    meta = {"name": req.name, "annotations": {ANN_PROVISIONED_BY: driver}, "finalizers": [FINALIZER]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": pv_spec}


class Provisioner:
    def __init__(self, ctx: base.Context) -> None:
        self.ctx = ctx
        self.identity = f"{int(time.time() * 1000)}-{random.randrange(10000)}-{ctx.driver}"
        ctrl = csi_pb2_grpc.ControllerStub(ctx.channel)
        caps = ctrl.ControllerGetCapabilities(csi_pb2.ControllerGetCapabilitiesRequest(), timeout=ctx.timeout)
        self.rpcs = {c.rpc.type for c in caps.capabilities}
        plugin = csi_pb2_grpc.IdentityStub(ctx.channel).GetPluginCapabilities(
            csi_pb2.GetPluginCapabilitiesRequest(), timeout=ctx.timeout
        )
        constraints = csi_pb2.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS
        self.topology = base.feature_gates(ctx.args.feature_gates).get("Topology", False) and any(
            c.service.type == constraints for c in plugin.capabilities
        )

    def sync(self) -> None:
        api = self.ctx.client
        pvs = {p["metadata"]["name"]: p for p in api.request("GET", "/api/v1/persistentvolumes")["items"]}
        classes = {
            c["metadata"]["name"]: c
            for c in api.request("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]
        }
        for pvc in api.request("GET", "/api/v1/persistentvolumeclaims")["items"]:
            key = f"pvc/{pvc['metadata']['namespace']}/{pvc['metadata']['name']}"
            if (
                self.wants(pvc, classes)
                and f"pvc-{pvc['metadata']['uid']}" not in pvs
                and self.ctx.backoff.due(key)
            ):
                sc = classes[pvc["spec"]["storageClassName"]]
                try:
                    self.provision(pvc, sc)
                    self.ctx.backoff.done(key)
                except ProvisionError as e:
                    msg = f'failed to provision volume with StorageClass "{sc["metadata"]["name"]}": {e}'
                    self.ctx.events.emit(
                        _kind(pvc, "PersistentVolumeClaim"), WARNING, "ProvisioningFailed", msg
                    )
                    self.ctx.backoff.failed(key)
        for pv in pvs.values():
            if self.to_delete(pv) and self.ctx.backoff.due(f"pv/{pv['metadata']['name']}"):
                self.delete(pv)

    def wants(self, pvc: Obj, classes: dict[str, Obj]) -> bool:
        m, spec = pvc["metadata"], pvc["spec"]
        ann = m.get("annotations") or {}
        if spec.get("volumeName") or m.get("deletionTimestamp"):
            return False
        if self.ctx.driver not in (ann.get(ANN_PROVISIONER[0]), ann.get(ANN_PROVISIONER[1])):
            return False
        sc = classes.get(spec.get("storageClassName") or "")
        if sc is None or sc.get("provisioner") != self.ctx.driver:
            return False
        return sc.get("volumeBindingMode") != "WaitForFirstConsumer" or bool(ann.get(ANN_SELECTED_NODE))

    def provision(self, pvc: Obj, sc: Obj) -> None:
        ref = _kind(pvc, "PersistentVolumeClaim")
        m = pvc["metadata"]
        self.ctx.events.emit(
            ref,
            NORMAL,
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{m["namespace"]}/{m["name"]}"',
        )
        args = self.ctx.args
        req = create_request(
            pvc,
            sc,
            default_fstype=args.default_fstype,
            extra_metadata=args.extra_create_metadata,
            multi_writer=Rpc.SINGLE_NODE_MULTI_WRITER in self.rpcs,
            topology=self.requirements(pvc, sc) if self.topology else None,
        )
        try:
            vol = (
                csi_pb2_grpc.ControllerStub(self.ctx.channel)
                .CreateVolume(req, timeout=self.ctx.timeout)
                .volume
            )
        except grpc.RpcError as e:
            raise ProvisionError(base.rpc_error(e)) from None
        pv = pv_object(pvc, sc, req, vol, self.ctx.driver, self.identity)
        try:
            self.ctx.client.request("POST", "/api/v1/persistentvolumes", pv)
        except ApiError as e:
            if e.code != 409:
                raise ProvisionError(f"error saving PersistentVolume {req.name}: {e}") from None
        self.ctx.events.emit(
            ref, NORMAL, "ProvisioningSucceeded", f"Successfully provisioned volume {req.name}"
        )

    def requirements(self, pvc: Obj, sc: Obj) -> csi_pb2.TopologyRequirement:
        api = self.ctx.client
        selected = (pvc["metadata"].get("annotations") or {}).get(ANN_SELECTED_NODE)
        csinodes = api.request("GET", "/apis/storage.k8s.io/v1/csinodes")["items"]
        segments: list[dict[str, str]] = []
        for cn in csinodes:
            name = cn["metadata"]["name"]
            driver = next((d for d in cn["spec"].get("drivers") or [] if d["name"] == self.ctx.driver), None)
            if driver is None or (selected and name != selected):
                continue
            labels = (api.request("GET", f"/api/v1/nodes/{name}")["metadata"].get("labels")) or {}
            seg = {k: labels[k] for k in driver.get("topologyKeys") or [] if k in labels}
            if seg and seg not in segments:
                segments.append(seg)
        if not segments:
            where = f"node {selected!r}" if selected else "any node"
            raise ProvisionError(
                f"error generating accessibility requirements: no topology key found on {where}"
            )
        topo = [csi_pb2.Topology(segments=s) for s in segments]
        return csi_pb2.TopologyRequirement(requisite=topo, preferred=topo)

    def to_delete(self, pv: Obj) -> bool:
        m, spec = pv["metadata"], pv["spec"]
        ours = (m.get("annotations") or {}).get(ANN_PROVISIONED_BY) == self.ctx.driver
        released = (pv.get("status") or {}).get("phase") in ("Released", "Failed") or bool(
            m.get("deletionTimestamp")
        )
        return ours and released and spec.get("persistentVolumeReclaimPolicy") == "Delete" and "csi" in spec

    def delete(self, pv: Obj) -> None:
        name = pv["metadata"]["name"]
        req = csi_pb2.DeleteVolumeRequest(volume_id=pv["spec"]["csi"]["volumeHandle"])
        try:
            csi_pb2_grpc.ControllerStub(self.ctx.channel).DeleteVolume(req, timeout=self.ctx.timeout)
        except grpc.RpcError as e:
            self.ctx.events.emit(
                _kind(pv, "PersistentVolume"), WARNING, "VolumeFailedDelete", base.rpc_error(e)
            )
            self.ctx.backoff.failed(f"pv/{name}")
            return
        api = self.ctx.client
        if not pv["metadata"].get("deletionTimestamp"):
            _delete_pv(api, name)
        left = _get_pv(api, name)
        if left is not None:
            base.remove_finalizer(api, f"/api/v1/persistentvolumes/{name}", left, FINALIZER)
        self.ctx.backoff.done(f"pv/{name}")


def _get_pv(api: Any, name: str) -> Obj | None:
    try:
        pv: Obj = api.request("GET", f"/api/v1/persistentvolumes/{name}")
        return pv
    except ApiError as e:
        if e.code != 404:
            raise
        return None


def _delete_pv(api: Any, name: str) -> None:
    try:
        api.request("DELETE", f"/api/v1/persistentvolumes/{name}")
    except ApiError as e:
        if e.code != 404:
            raise


def _kind(obj: Obj, kind: str) -> Obj:
    return {"kind": kind, "apiVersion": "v1", **obj}


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--extra-create-metadata", action="store_true")
    p.add_argument("--default-fstype", default="")


def main(argv: list[str] | None = None) -> int:
    return base.main(
        "csi-provisioner", __doc__, lambda driver: driver.replace("/", "-"), Provisioner, argv, _flags
    )


if __name__ == "__main__":
    raise SystemExit(main())
