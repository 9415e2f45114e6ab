"""kube-controller-manager's PV controller (pkg/controller/volume/persistentvolume), for dynamically
provisioned CSI volumes:

- an unbound claim whose StorageClass is missing: Warning ProvisioningFailed `storageclass.storage.k8s.io
  "<name>" not found`, and it stays Pending;
- an unbound claim of a class: `volume.kubernetes.io/storage-provisioner` (and the beta key) set to the
  class's provisioner, with the Normal Event ExternalProvisioning, or WaitForFirstConsumer while a
  WaitForFirstConsumer claim has no `volume.kubernetes.io/selected-node`;
- a PV whose claimRef names an unbound claim by uid: the claim bound to it (spec.volumeName,
  `pv.kubernetes.io/bind-completed`, `bound-by-controller`; status Bound with the PV's capacity and
  access modes) and the PV's phase Bound;
- a Bound PV whose claim is gone (or another claim now has its name): phase Released (the provisioner
  deletes it when its policy is Delete; Retain keeps it).

Not done: binding claims to pre-existing PVs by size and selector, the Recycle policy, the
pvc-protection/pv-protection finalizers.
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.sidecars.events import NORMAL, WARNING, EventRecorder

Obj = dict[str, Any]
ANN_PROVISIONER = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
MERGE = "application/merge-patch+json"


def claim_path(pvc: Obj, sub: str = "") -> str:
    m = pvc["metadata"]
    return f"/api/v1/namespaces/{m['namespace']}/persistentvolumeclaims/{m['name']}" + (
        f"/{sub}" if sub else ""
    )


class PVController:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events = EventRecorder(lambda: client, "persistentvolume-controller")

    def sync(self) -> None:
        api = self.client
        claims = api.request("GET", "/api/v1/persistentvolumeclaims")["items"]
        pvs = api.request("GET", "/api/v1/persistentvolumes")["items"]
        classes = {
            c["metadata"]["name"]: c
            for c in api.request("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]
        }
        by_uid = {c["metadata"]["uid"]: c for c in claims}
        for pvc in claims:
            if not pvc["spec"].get("volumeName") and not pvc["metadata"].get("deletionTimestamp"):
                pv = next(
                    (
                        p
                        for p in pvs
                        if (p["spec"].get("claimRef") or {}).get("uid") == pvc["metadata"]["uid"]
                    ),
                    None,
                )
                if pv is not None:
                    self.bind(pvc, pv)
                else:
                    self.unbound(pvc, classes)
        for pv in pvs:
            ref, phase = pv["spec"].get("claimRef"), (pv.get("status") or {}).get("phase")
            claim = by_uid.get((ref or {}).get("uid", ""))
            if ref and claim is None and phase in ("Bound", "Pending", "Available", None):
                self._pv_phase(pv, "Released")
            elif (
                claim is not None
                and claim["spec"].get("volumeName") == pv["metadata"]["name"]
                and phase != "Bound"
            ):
                self._pv_phase(pv, "Bound")

    def _pv_phase(self, pv: Obj, phase: str) -> None:
        path = f"/api/v1/persistentvolumes/{pv['metadata']['name']}/status"
        self.client.request("PATCH", path, {"status": {"phase": phase}}, MERGE)

    def unbound(self, pvc: Obj, classes: dict[str, Obj]) -> None:
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", **pvc}
        name = pvc["spec"].get("storageClassName") or ""
        if not name:
            return  # no class: only a pre-existing PV could bind it (not done here)
        sc = classes.get(name)
        if sc is None:
            self.events.emit(
                ref, WARNING, "ProvisioningFailed", f'storageclass.storage.k8s.io "{name}" not found'
            )
            return
        ann = pvc["metadata"].get("annotations") or {}
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer" and not ann.get(ANN_SELECTED_NODE):
            self.events.emit(
                ref, NORMAL, "WaitForFirstConsumer", "waiting for first consumer to be created before binding"
            )
            return
        if ann.get(ANN_PROVISIONER[0]) != sc["provisioner"]:
            meta = {"annotations": {k: sc["provisioner"] for k in ANN_PROVISIONER}}
            self.client.request("PATCH", claim_path(pvc), {"metadata": meta}, MERGE)
        msg = (
            f"Waiting for a volume to be created either by the external provisioner '{sc['provisioner']}' or "
            "manually by the system administrator. If volume creation is delayed, please verify that the "
            "provisioner is running and correctly registered."
        )
        self.events.emit(ref, NORMAL, "ExternalProvisioning", msg)

    def bind(self, pvc: Obj, pv: Obj) -> None:
        meta = {
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
            },
            "resourceVersion": pvc["metadata"]["resourceVersion"],
        }
        self.client.request(
            "PATCH",
            claim_path(pvc),
            {"metadata": meta, "spec": {"volumeName": pv["metadata"]["name"]}},
            MERGE,
        )
        status = {
            "phase": "Bound",
            "accessModes": pv["spec"].get("accessModes"),
            "capacity": pv["spec"]["capacity"],
        }
        self.client.request("PATCH", claim_path(pvc, "status"), {"status": status}, MERGE)
        self._pv_phase(pv, "Bound")
