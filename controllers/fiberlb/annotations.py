"""The spec's Service annotations, parsed and validated once (`LbOptions.from_service`).

A bad value is an `InvalidAnnotation`: the controller turns it into a Warning Event and the
Service's `FiberLBReady=False` condition, and changes nothing it already programmed.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

from controllers.resources import Service

PREFIX = "fiberlb.plasmacloud.io/"
ALGORITHM = PREFIX + "algorithm"
HC_PATH = PREFIX + "health-check-path"
HC_INTERVAL = PREFIX + "health-check-interval"
HC_TIMEOUT = PREFIX + "health-check-timeout"
HC_RETRIES = PREFIX + "health-check-retries"
SESSION_AFFINITY = PREFIX + "session-affinity"
LOAD_BALANCER_ID = PREFIX + "load-balancer-id"
REQUESTED_IP = PREFIX + "load-balancer-ip"
"""An external IP to use (like spec.loadBalancerIP, which Kubernetes deprecated)."""
ALLOW_SHARED_IP = PREFIX + "allow-shared-ip"
"""A sharing key: Services with the same key may share an IP when their ports are disjoint."""

Algorithm = Literal["round-robin", "least-conn", "ip-hash"]
ALGORITHMS: tuple[Algorithm, ...] = ("round-robin", "least-conn", "ip-hash")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class ServiceConfigError(ValueError):
    """A Service the controller cannot program as asked; `reason` is the Event/condition reason."""

    reason: ClassVar[str] = "InvalidService"


class InvalidAnnotation(ServiceConfigError):
    reason = "InvalidAnnotation"


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration subset the spec uses: "10s", "500ms", "1m30s"; a bare number is seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r} (use e.g. 10s, 500ms, 1m)")
    return sum(float(n) * _UNIT[u] for n, u in parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthCheck:
    path: str = ""
    """HTTP path; empty for a TCP connect check."""
    interval: float = 10.0
    timeout: float = 5.0
    retries: int = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class LbOptions:
    algorithm: Algorithm = "round-robin"
    health_check: HealthCheck | None = None
    """None unless a health-check annotation is present."""
    affinity_timeout: int = 0
    """Seconds a client sticks to its backend (0: no affinity)."""
    load_balancer_id: str = ""
    requested_ip: str = ""
    sharing_key: str = ""

    @classmethod
    def from_service(cls, svc: Service) -> Self:
        a = svc.annotations
        algorithm = a.get(ALGORITHM, "round-robin").strip()
        if algorithm not in ALGORITHMS:
            raise InvalidAnnotation(f"{ALGORITHM}={algorithm!r}: must be one of {', '.join(ALGORITHMS)}")
        return cls(
            algorithm=algorithm,
            health_check=_health_check(svc),
            affinity_timeout=_affinity(svc),
            load_balancer_id=a.get(LOAD_BALANCER_ID, "").strip(),
            requested_ip=_requested_ip(svc),
            sharing_key=a.get(ALLOW_SHARED_IP, "").strip(),
        )


def _health_check(svc: Service) -> HealthCheck | None:
    a = svc.annotations
    if not any(k in a for k in (HC_PATH, HC_INTERVAL, HC_TIMEOUT, HC_RETRIES)):
        return None
    d = HealthCheck()
    path = a.get(HC_PATH, "").strip()
    if path and not path.startswith("/"):
        raise InvalidAnnotation(f"{HC_PATH}={path!r}: must be an absolute path such as /healthz")
    interval = _positive_duration(a, HC_INTERVAL, d.interval)
    timeout = _positive_duration(a, HC_TIMEOUT, d.timeout)
    if timeout > interval:
        raise InvalidAnnotation(f"{HC_TIMEOUT} ({timeout:g}s) must not exceed {HC_INTERVAL} ({interval:g}s)")
    raw = a.get(HC_RETRIES, str(d.retries)).strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 10:
        raise InvalidAnnotation(f"{HC_RETRIES}={raw!r}: must be an integer from 1 to 10")
    return HealthCheck(path=path, interval=interval, timeout=timeout, retries=int(raw))


def _positive_duration(a: dict[str, str], key: str, default: float) -> float:
    if key not in a:
        return default
    try:
        value = parse_duration(a[key])
    except ValueError as e:
        raise InvalidAnnotation(f"{key}: {e}") from e
    if not 1 <= value <= 3600:
        raise InvalidAnnotation(f"{key}={a[key]!r}: must be between 1s and 1h")
    return value


MAX_AFFINITY_SECONDS = 65535
"""OVN's limit for Load_Balancer options:affinity_timeout (ovn-nb(5))."""


def _affinity(svc: Service) -> int:
    raw = svc.annotations.get(SESSION_AFFINITY, "").strip().lower()
    if raw not in ("", "none", "client-ip"):
        raise InvalidAnnotation(f"{SESSION_AFFINITY}={raw!r}: must be client-ip or none")
    if raw == "none" or (not raw and svc.session_affinity != "ClientIP"):
        return 0
    return max(1, min(svc.session_affinity_timeout, MAX_AFFINITY_SECONDS))


def _requested_ip(svc: Service) -> str:
    raw = svc.annotations.get(REQUESTED_IP, "").strip() or svc.load_balancer_ip.strip()
    if not raw:
        return ""
    source = REQUESTED_IP if svc.annotations.get(REQUESTED_IP, "").strip() else "spec.loadBalancerIP"
    try:
        return str(ipaddress.IPv4Address(raw))
    except ValueError:
        raise InvalidAnnotation(f"{source}={raw!r}: not an IPv4 address") from None
