"""Images the overlay names that this project does not build and the runner does not stand in for
(the README's table says why, container by container). Their containers stay Waiting with reason
`NotBooted`, so a Pod holding one is never reported Ready.

None are left: the Kubernetes CSI sidecars (registry.k8s.io/sig-storage/..., Go images no registry
here can serve) are stood in for by the runner (nodeenv/kubelet/sidecars/, `STAND_INS`)."""

from __future__ import annotations

from nodeenv.kubelet.sidecars import repository

NOT_BOOTED: dict[str, str] = {}


def not_booted(image: str) -> str | None:
    """Why `image` is not booted, or None when it is ours or stood in for."""
    return NOT_BOOTED.get(repository(image))
