"""Stand-ins for the Kubernetes CSI sidecars the overlay's CSI pods name (Go images from
registry.k8s.io, which no registry here can serve and this project does not build).

The runner runs one stand-in per sidecar container, in the container's place (launch.py): a
process doing that sidecar's documented job, configured from the container's own args (its
`--csi-address` mapped through its own volume mounts), in the pod's network namespace, talking to
the booted driver over the CSI socket and to the API with the pod's service-account token (so the
RBAC the overlay grants is what it has):

- provisioner.py: external-provisioner (PVC -> CreateVolume -> PV; Released PV -> DeleteVolume)
- attacher.py: external-attacher (VolumeAttachment -> ControllerPublish/UnpublishVolume)
- resizer.py: external-resizer (a PVC's larger request -> ControllerExpandVolume)
- snapshotter.py: csi-snapshotter (VolumeSnapshotContent -> CreateSnapshot/DeleteSnapshot)
- registrar.py: node-driver-registrar (kubelet's plugin registration socket; nodeenv/csi_registrar.py)
- nodeenv/kubelet/livenessprobe.py: livenessprobe (the driver's /healthz)

base.py holds what they share (flags, in-cluster config, leader election, events, the loop).
"""

from __future__ import annotations

SIG_STORAGE = "registry.k8s.io/sig-storage/"
STAND_INS: dict[str, str] = {
    SIG_STORAGE + "csi-provisioner": "nodeenv.kubelet.sidecars.provisioner",
    SIG_STORAGE + "csi-attacher": "nodeenv.kubelet.sidecars.attacher",
    SIG_STORAGE + "csi-resizer": "nodeenv.kubelet.sidecars.resizer",
    SIG_STORAGE + "csi-snapshotter": "nodeenv.kubelet.sidecars.snapshotter",
    SIG_STORAGE + "csi-node-driver-registrar": "nodeenv.kubelet.sidecars.registrar",
    SIG_STORAGE + "livenessprobe": "nodeenv.kubelet.livenessprobe",
}
"""Image repository -> the module standing in for it (python -m <module>)."""


def repository(image: str) -> str:
    return image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image


def stand_in_module(image: str) -> str | None:
    """The module standing in for `image`, or None when the image is booted itself."""
    return STAND_INS.get(repository(image))


def module_path(module: str) -> str:
    """How the README and a container's status name a stand-in: its source file."""
    return module.replace(".", "/") + ".py"
