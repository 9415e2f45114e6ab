from __future__ import annotations

import pytest

from controllers.fiberlb.annotations import (
    HealthCheck,
    InvalidAnnotation,
    LbOptions,
    parse_duration,
)
from controllers.resources import Service

P = "fiberlb.plasmacloud.io/"
TIMEOUT_30 = {"timeoutSeconds": 30}
TIMEOUT_DAY = {"timeoutSeconds": 86400}


def svc(annotations: dict[str, str] | None = None, **spec: object) -> Service:
    body = {"metadata": {"namespace": "ns", "name": "web", "annotations": annotations or {}}, "spec": spec}
    return Service.from_dict(body)


@pytest.mark.parametrize(
    ("text", "seconds"), [("10s", 10), ("500ms", 0.5), ("1m30s", 90), ("2h", 7200), ("7", 7), ("1.5s", 1.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "10x", "1m 3s", "-1s", "5d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_defaults_without_annotations() -> None:
    assert LbOptions.from_service(svc()) == LbOptions()


def test_spec_example() -> None:
    opts = LbOptions.from_service(
        svc(
            {
                P + "load-balancer-id": "lb-abc123",
                P + "algorithm": "ip-hash",
                P + "health-check-path": "/health",
                P + "health-check-interval": "10s",
                P + "health-check-timeout": "5s",
                P + "health-check-retries": "3",
                P + "session-affinity": "client-ip",
            }
        )
    )
    assert opts.algorithm == "ip-hash" and opts.load_balancer_id == "lb-abc123"
    assert opts.health_check == HealthCheck(path="/health", interval=10, timeout=5, retries=3)
    assert opts.affinity_timeout == 10800  # Kubernetes' default timeout for ClientIP


@pytest.mark.parametrize(
    ("annotations", "spec", "expected"),
    [
        ({}, {"sessionAffinity": "ClientIP"}, 10800),
        ({}, {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": TIMEOUT_30}}, 30),
        ({}, {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": TIMEOUT_DAY}}, 65535),
        ({P + "session-affinity": "none"}, {"sessionAffinity": "ClientIP"}, 0),
        ({P + "session-affinity": "client-ip"}, {}, 10800),
        ({}, {}, 0),
    ],
)  # fmt: skip
def test_affinity(annotations: dict[str, str], spec: dict[str, object], expected: int) -> None:
    assert LbOptions.from_service(svc(annotations, **spec)).affinity_timeout == expected


def test_requested_ip_annotation_wins_over_spec() -> None:
    s = svc({P + "load-balancer-ip": "192.168.100.7"}, loadBalancerIP="192.168.100.9")
    assert LbOptions.from_service(s).requested_ip == "192.168.100.7"
    assert LbOptions.from_service(svc(loadBalancerIP="192.168.100.9")).requested_ip == "192.168.100.9"


@pytest.mark.parametrize(
    ("annotations", "spec", "needle"),
    [
        ({P + "algorithm": "random"}, {}, "algorithm"),
        ({P + "health-check-interval": "soon"}, {}, "health-check-interval"),
        ({P + "health-check-interval": "0s"}, {}, "between 1s and 1h"),
        ({P + "health-check-timeout": "20s", P + "health-check-interval": "10s"}, {}, "must not exceed"),
        ({P + "health-check-retries": "many"}, {}, "health-check-retries"),
        ({P + "health-check-retries": "0"}, {}, "health-check-retries"),
        ({P + "health-check-path": "health"}, {}, "absolute path"),
        ({P + "session-affinity": "cookie"}, {}, "session-affinity"),
        ({P + "load-balancer-ip": "300.1.1.1"}, {}, "load-balancer-ip"),
        ({}, {"loadBalancerIP": "not-an-ip"}, "spec.loadBalancerIP"),
    ],
)
def test_invalid_annotations_name_the_culprit(
    annotations: dict[str, str], spec: dict[str, object], needle: str
) -> None:
    with pytest.raises(InvalidAnnotation, match=needle) as info:
        LbOptions.from_service(svc(annotations, **spec))
    assert info.value.reason == "InvalidAnnotation"
