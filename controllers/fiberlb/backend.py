"""What the reconciler writes to: one interface, two implementations.

- `ovn` (ovn_backend.py, the embedded default): OVN Load_Balancer rows on the namespace switches
  and the cluster router; also programs ClusterIP Services.
- `fiberlb` (grpc_backend.py): PlasmaCloud's LoadBalancerService over gRPC.

Both are synchronous (ovsdbapp and the gRPC stubs block); the reconciler calls them through
`asyncio.to_thread`. Each method is idempotent: `apply` makes the backend match `desired`
exactly (creating, changing or deleting only what differs), `delete` succeeds when nothing is
there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from controllers.fiberlb.annotations import ServiceConfigError
from controllers.fiberlb.desired import DesiredLB


class BackendError(ServiceConfigError):
    """The backend refused or failed; retried with backoff, reported as an Event and condition."""

    reason: ClassVar[str] = "BackendError"


@dataclass(frozen=True, slots=True)
class Applied:
    id: str = ""
    """The backend's id of the load balancer ('' when it has none)."""
    external_ip: str = ""
    """The IP it answers on, when the backend chose it ('' otherwise)."""


class Backend(Protocol):
    name: str
    programs_cluster_ips: bool
    """True when ClusterIP Services are programmed too (the ovn backend)."""
    shares_ips: bool
    """True when two Services' load balancers may answer on one IP (disjoint ports)."""
    allocates_ips: bool
    """True when the backend picks an external IP itself if none is given (FiberLB's own pool)."""

    def apply(self, desired: DesiredLB) -> Applied:
        """Make the backend match `desired` (no external IP in `desired.vips`: the backend picks one)."""

    def delete(self, service: str, uid: str) -> None:
        """Remove everything programmed for the Service `namespace/name`."""

    def services(self) -> set[str]:
        """Every Service (namespace/name) the backend holds objects for (garbage collection)."""

    def allocations(self) -> dict[str, tuple[str, ...]]:
        """Service (namespace/name) → the external IPs its load balancer answers on, read from the
        backend's own objects: the platform's record of allocations (never a Service's status)."""

    def close(self) -> None: ...
