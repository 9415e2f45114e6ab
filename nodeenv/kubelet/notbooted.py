"""Images the overlay names that this project does not build, so the runner does not boot them (the
README's table says why, container by container). Their containers stay Waiting with reason
`NotBooted`, so a Pod holding one is never reported Ready."""

from __future__ import annotations

SIG_STORAGE = "registry.k8s.io/sig-storage/"
NOT_BOOTED: dict[str, str] = {
    SIG_STORAGE + "csi-provisioner": "Kubernetes CSI sidecar (Go); no registry is reachable here to pull it",
    SIG_STORAGE + "csi-attacher": "Kubernetes CSI sidecar (Go); no registry is reachable here to pull it",
    SIG_STORAGE + "csi-resizer": "Kubernetes CSI sidecar (Go); no registry is reachable here to pull it",
    SIG_STORAGE + "csi-snapshotter": "Kubernetes CSI sidecar (Go); no registry is reachable here to pull it",
    SIG_STORAGE + "csi-node-driver-registrar": "Kubernetes CSI sidecar (Go); no registry is reachable here",
    SIG_STORAGE + "livenessprobe": "Kubernetes CSI sidecar (Go); no registry is reachable here to pull it",
}


def not_booted(image: str) -> str | None:
    """Why `image` is not booted, or None when it is ours."""
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return NOT_BOOTED.get(repo)
