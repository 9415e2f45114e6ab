from __future__ import annotations

from typing import Any

import pytest

from controllers.fiberlb.annotations import LbOptions
from controllers.fiberlb.desired import Backend, NoPorts, desired_lb
from controllers.resources import EndpointSlice, Service


def service(ports: list[dict[str, Any]], **spec: Any) -> Service:
    return Service.from_dict(
        {
            "metadata": {"namespace": "ns", "name": "web", "uid": "u1"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5", "ports": ports, **spec},
        }
    )


def ep(
    ip: str, ready: bool | None = True, serving: bool | None = None, terminating: bool = False
) -> dict[str, Any]:
    cond: dict[str, Any] = {"terminating": terminating}
    if ready is not None:
        cond["ready"] = ready
    if serving is not None:
        cond["serving"] = serving
    return {"addresses": [ip], "conditions": cond}


def eps(*endpoints: dict[str, Any], ports: list[dict[str, Any]] | None = None, service: str = "web",
        address_type: str = "IPv4") -> EndpointSlice:  # fmt: skip
    return EndpointSlice.from_dict(
        {
            "metadata": {"namespace": "ns", "name": f"{service}-x",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": address_type,
            "endpoints": list(endpoints),
            "ports": ports if ports is not None else [{"name": "http", "protocol": "TCP", "port": 8080}],
        }
    )  # fmt: skip


HTTP = [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]


def backends(svc: Service, *slices: EndpointSlice) -> list[tuple[str, int]]:
    lb = desired_lb(svc, slices, ["192.168.100.1"], LbOptions())
    return [(b.ip, b.port) for b in lb.listeners[0].backends]


@pytest.mark.parametrize(
    ("endpoints", "expected"),
    [
        ([ep("10.0.0.1"), ep("10.0.0.2")], ["10.0.0.1", "10.0.0.2"]),
        ([ep("10.0.0.1"), ep("10.0.0.2", ready=False)], ["10.0.0.1"]),
        ([ep("10.0.0.1", ready=None)], ["10.0.0.1"]),  # absent ready means ready
        # graceful drain: no ready endpoint, serving + terminating ones are used
        ([ep("10.0.0.1", ready=False, serving=True, terminating=True)], ["10.0.0.1"]),
        ([ep("10.0.0.1", ready=False, serving=True, terminating=True), ep("10.0.0.2")], ["10.0.0.2"]),
        ([ep("10.0.0.1", ready=False, serving=False, terminating=True)], []),
        ([ep("10.0.0.1", ready=False, serving=True, terminating=False)], []),
        ([], []),
    ],
)
def test_endpoint_selection(endpoints: list[dict[str, Any]], expected: list[str]) -> None:
    assert backends(service(HTTP), eps(*endpoints)) == [(ip, 8080) for ip in expected]


def test_publish_not_ready_addresses() -> None:
    svc = service(HTTP, publishNotReadyAddresses=True)
    assert backends(svc, eps(ep("10.0.0.1", ready=False))) == [("10.0.0.1", 8080)]


def test_slices_merge_dedupe_and_filter() -> None:
    svc = service(HTTP)
    got = backends(
        svc,
        eps(ep("10.0.0.2"), ep("10.0.0.1")),
        eps(ep("10.0.0.1"), ep("10.0.0.3")),
        eps(ep("10.0.0.9"), service="other"),
        eps(ep("fd00::1"), address_type="IPv6"),
    )
    assert got == [("10.0.0.1", 8080), ("10.0.0.2", 8080), ("10.0.0.3", 8080)]


def test_named_target_ports_resolve_per_slice() -> None:
    svc = service([{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"}])
    got = backends(
        svc,
        eps(ep("10.0.0.1"), ports=[{"name": "http", "protocol": "TCP", "port": 8080}]),
        eps(ep("10.0.0.2"), ports=[{"name": "http", "protocol": "TCP", "port": 9090}]),
        eps(ep("10.0.0.3"), ports=[{"name": "metrics", "protocol": "TCP", "port": 9100}]),
    )
    assert got == [("10.0.0.1", 8080), ("10.0.0.2", 9090)]


def test_multi_port_multi_protocol() -> None:
    svc = service(
        [
            {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": 5353},
            {"name": "dns-tcp", "protocol": "TCP", "port": 53, "targetPort": 5353},
            {"name": "sctp", "protocol": "SCTP", "port": 9000, "targetPort": 9000},
        ]
    )
    sl = eps(
        ep("10.0.0.1"),
        ports=[
            {"name": "dns", "protocol": "UDP", "port": 5353},
            {"name": "dns-tcp", "protocol": "TCP", "port": 5353},
            {"name": "sctp", "protocol": "SCTP", "port": 9000},
        ],
    )
    lb = desired_lb(svc, [sl], ["192.168.100.1", "10.96.0.5", "192.168.100.1", ""], LbOptions())
    assert lb.vips == ("192.168.100.1", "10.96.0.5")
    assert lb.protocols == ("SCTP", "TCP", "UDP")
    assert [(x.protocol, x.port, x.backends) for x in lb.listeners] == [
        ("UDP", 53, (Backend("10.0.0.1", 5353),)),
        ("TCP", 53, (Backend("10.0.0.1", 5353),)),
        ("SCTP", 9000, (Backend("10.0.0.1", 9000),)),
    ]


def test_slice_without_ports_uses_numeric_target_port() -> None:
    assert backends(service(HTTP), eps(ep("10.0.0.1"), ports=[])) == [("10.0.0.1", 8080)]


def test_no_ports_is_an_error() -> None:
    with pytest.raises(NoPorts, match="no ports") as info:
        desired_lb(service([]), [], ["192.168.100.1"], LbOptions())
    assert info.value.reason == "NoPorts"
