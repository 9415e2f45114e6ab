"""fiberlb-controller's own flags (the machinery parses the common ones: kubeconfig, leader
election, metrics address, workers, log level). Every flag falls back to a FIBERLB_* variable."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from common.plasmacloud_grpc import PlasmaCloudAuth, add_flags
from controllers.fiberlb.ippool import parse_pools
from controllers.machinery.settings import parse_bool

ENV_PREFIX = "FIBERLB_"
LB_CLASS = "fiberlb.plasmacloud.io/lb"
BACKENDS = ("ovn", "fiberlb")


@dataclass(frozen=True, slots=True, kw_only=True)
class FiberlbSettings:
    external_ip_pool: str = ""
    """Comma-separated CIDRs and/or first-last ranges (optional with the fiberlb backend: empty lets
    FiberLB allocate from its own pool, as CreateLoadBalancer does without external_ip)."""
    load_balancer_class: str = LB_CLASS
    default_class: bool = False
    """Also take LoadBalancer Services that name no class (k3s, with servicelb disabled)."""
    backend: str = "ovn"
    ovn_nb_db: str = "unix:/run/ovn/ovnnb_db.sock"
    fiberlb_endpoint: str = "fiberlb-server:7000"
    plasmacloud: PlasmaCloudAuth | None = None
    """fiberlb backend: CA and IAM token file of its TLS + token calls (--plasmacloud-*)."""
    org_id: str = ""
    project_id: str = ""
    debounce: float = 0.1
    """Seconds endpoint changes of one Service are coalesced over before it is reprogrammed."""
    cluster_ips: bool = True
    """ovn backend: also program ClusterIP Services (ClusterIP:port -> endpoints)."""

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Self:
        out = cls(
            external_ip_pool=a.external_ip_pool,
            load_balancer_class=a.load_balancer_class,
            default_class=parse_bool(a.default_class),
            backend=a.backend,
            ovn_nb_db=a.ovn_nb_db,
            fiberlb_endpoint=a.fiberlb_endpoint,
            plasmacloud=PlasmaCloudAuth.from_args(a) if a.backend == "fiberlb" else None,
            org_id=a.org_id,
            project_id=a.project_id,
            debounce=float(a.debounce),
            cluster_ips=parse_bool(a.cluster_ips),
        )
        out.validate()
        return out

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if not parse_pools(self.external_ip_pool) and self.backend != "fiberlb":
            raise ValueError("--external-ip-pool is required (CIDRs or first-last ranges, comma-separated)")
        if not 0 <= self.debounce <= 60:
            raise ValueError("--debounce must be between 0 and 60 seconds")


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    d = FiberlbSettings()

    def add(flag: str, default: object, help: str, **kw: object) -> None:
        var = ENV_PREFIX + flag.removeprefix("--").replace("-", "_").upper()
        value = env.get(var, str(default).lower() if isinstance(default, bool) else str(default))
        p.add_argument(flag, default=value, help=f"{help} (env {var}; default {default!r})", **kw)  # type: ignore[arg-type]

    add(
        "--external-ip-pool",
        d.external_ip_pool,
        "external IPs: CIDRs and/or first-last ranges, comma-separated",
    )
    add("--load-balancer-class", d.load_balancer_class, "spec.loadBalancerClass this controller serves")
    add("--default-class", d.default_class, "also serve LoadBalancer Services without a class",
        nargs="?", const="true")  # fmt: skip
    add(
        "--backend", d.backend, "ovn (OVN Load_Balancer rows) or fiberlb (FiberLB gRPC API)", choices=BACKENDS
    )
    add("--ovn-nb-db", d.ovn_nb_db, "OVN northbound database (ovn backend)")
    add("--fiberlb-endpoint", d.fiberlb_endpoint, "FiberLB LoadBalancerService host:port (fiberlb backend)")
    add_flags(p, env)
    add("--org-id", d.org_id, "PlasmaCloud organization of created load balancers (fiberlb backend)")
    add("--project-id", d.project_id, "PlasmaCloud project of created load balancers (fiberlb backend)")
    add("--debounce", d.debounce, "seconds endpoint changes are coalesced before reprogramming")
    add(
        "--cluster-ips", d.cluster_ips, "ovn backend: program ClusterIP Services too", nargs="?", const="true"
    )
