"""Record generation for every Service shape, table-driven (Kubernetes DNS spec v1.1.0 + hosting spec §4)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.flashdns.records import (
    Record,
    dashed,
    pod_records,
    reverse_name,
    service_records,
    version_records,
)
from controllers.resources import EndpointSlice, Pod, Service

D = "cluster.local"


def svc(name: str = "web", ns: str = "default", **spec: Any) -> Service:
    status = spec.pop("status", {})
    annotations = spec.pop("annotations", {})
    return Service.from_dict(
        {
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": spec,
            "status": status,
        }
    )


def eps(
    service: str, *endpoints: dict[str, Any], ports: list[dict[str, Any]] | None = None, family: str = "IPv4"
) -> EndpointSlice:
    return EndpointSlice.from_dict(
        {
            "metadata": {
                "name": f"{service}-x",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": service},
            },
            "addressType": family,
            "endpoints": list(endpoints),
            "ports": ports if ports is not None else [{"name": "http", "protocol": "TCP", "port": 8080}],
        }
    )


def ep(ip: str, ready: bool | None = True, hostname: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"addresses": [ip]}
    if ready is not None:
        out["conditions"] = {"ready": ready}
    if hostname:
        out["hostname"] = hostname
    return out


def R(name: str, type_: str, value: str) -> Record:
    return Record(name, type_, value)


WEB = "web.default.svc.cluster.local."
HTTP = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]

CASES: list[tuple[str, Service, list[EndpointSlice], set[Record]]] = [
    (
        "ClusterIP with a named and an unnamed port",
        svc(clusterIP="10.96.0.100", ports=[*HTTP, {"port": 9090}]),
        [],
        {
            R(WEB, "A", "10.96.0.100"),
            R("100.0.96.10.in-addr.arpa.", "PTR", WEB),
            R("_http._tcp.web.default.svc.cluster.local.", "SRV", f"0 100 80 {WEB}"),
        },
    ),
    (
        "dual-stack ClusterIP: A and AAAA, PTR in in-addr.arpa and ip6.arpa",
        svc(
            clusterIPs=["10.96.0.7", "fd00:10:96::7"], ports=[{"name": "dns", "port": 53, "protocol": "UDP"}]
        ),
        [],
        {
            R(WEB, "A", "10.96.0.7"),
            R(WEB, "AAAA", "fd00:10:96::7"),
            R("7.0.96.10.in-addr.arpa.", "PTR", WEB),
            R(reverse_name("fd00:10:96::7"), "PTR", WEB),
            R("_dns._udp.web.default.svc.cluster.local.", "SRV", f"0 100 53 {WEB}"),
        },
    ),
    (
        "LoadBalancer: the first ingress IP beside the ClusterIP (hosting spec)",
        svc(
            type="LoadBalancer",
            clusterIP="10.96.0.9",
            status={"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}, {"ip": "192.0.2.11"}]}},
        ),
        [],
        {R(WEB, "A", "10.96.0.9"), R(WEB, "A", "192.0.2.10"), R("9.0.96.10.in-addr.arpa.", "PTR", WEB)},
    ),
    (
        "ExternalName → CNAME",
        svc(type="ExternalName", externalName="www.Example.com"),
        [],
        {R(WEB, "CNAME", "www.Example.com.")},
    ),
    ("ExternalName that is an IP: nothing", svc(type="ExternalName", externalName="192.0.2.1"), [], set()),
    ("ClusterIP not allocated yet: nothing", svc(ports=HTTP), [], set()),
    (
        "headless with hostnames (StatefulSet): per-endpoint names, SRV per host, PTR to the host",
        svc(clusterIP="None", ports=HTTP),
        [eps("web", ep("10.244.1.10", hostname="web-0"), ep("10.244.1.11", hostname="web-1"))],
        {
            R(WEB, "A", "10.244.1.10"),
            R(WEB, "A", "10.244.1.11"),
            R("web-0." + WEB, "A", "10.244.1.10"),
            R("web-1." + WEB, "A", "10.244.1.11"),
            R("10.1.244.10.in-addr.arpa.", "PTR", "web-0." + WEB),
            R("11.1.244.10.in-addr.arpa.", "PTR", "web-1." + WEB),
            R("_http._tcp." + WEB, "SRV", f"0 50 8080 web-0.{WEB}"),
            R("_http._tcp." + WEB, "SRV", f"0 50 8080 web-1.{WEB}"),
        },
    ),
    (
        "headless without hostnames: dashed IPs; not-ready endpoints left out; unset ready means ready",
        svc(clusterIP="None", ports=HTTP),
        [eps("web", ep("10.244.1.10", ready=None), ep("10.244.1.12", ready=False))],
        {
            R(WEB, "A", "10.244.1.10"),
            R("10-244-1-10." + WEB, "A", "10.244.1.10"),
            R("10.1.244.10.in-addr.arpa.", "PTR", "10-244-1-10." + WEB),
            R("_http._tcp." + WEB, "SRV", f"0 100 8080 10-244-1-10.{WEB}"),
        },
    ),
    (
        "headless with publishNotReadyAddresses: not-ready endpoints published",
        svc(clusterIP="None", publishNotReadyAddresses=True),
        [eps("web", ep("10.244.1.12", ready=False), ports=[])],
        {
            R(WEB, "A", "10.244.1.12"),
            R("10-244-1-12." + WEB, "A", "10.244.1.12"),
            R("12.1.244.10.in-addr.arpa.", "PTR", "10-244-1-12." + WEB),
        },
    ),
    (
        "headless with the tolerate-unready annotation (spec's definition of ready)",
        svc(clusterIP="None", annotations={"service.alpha.kubernetes.io/tolerate-unready-endpoints": "true"}),
        [eps("web", ep("10.244.1.12", ready=False), ports=[])],
        {
            R(WEB, "A", "10.244.1.12"),
            R("10-244-1-12." + WEB, "A", "10.244.1.12"),
            R("12.1.244.10.in-addr.arpa.", "PTR", "10-244-1-12." + WEB),
        },
    ),
    (
        "headless with no ready endpoint: no record at all (the name is NXDOMAIN)",
        svc(clusterIP="None", ports=HTTP),
        [eps("web", ep("10.244.1.12", ready=False))],
        set(),
    ),
    (
        "headless IPv6 slice: AAAA, dashed IPv6 host, ip6.arpa PTR; FQDN slices ignored",
        svc(clusterIP="None"),
        [eps("web", ep("fd00::5"), ports=[], family="IPv6"), eps("web", ep("db.example.com"), family="FQDN")],
        {
            R(WEB, "AAAA", "fd00::5"),
            R("fd00--5." + WEB, "AAAA", "fd00::5"),
            R(reverse_name("fd00::5"), "PTR", "fd00--5." + WEB),
        },
    ),
]


@pytest.mark.parametrize(("service", "slices", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_service_records(service: Service, slices: list[EndpointSlice], expected: set[Record]) -> None:
    assert service_records(service, slices, D) == expected


def test_headless_same_hostname_with_two_addresses_gets_one_record_per_ip() -> None:
    slice_ = eps("db", {"addresses": ["10.244.0.4", "10.244.0.5"], "hostname": "db-0"}, ports=[])
    got = service_records(svc("db", clusterIP="None"), [slice_], D)
    assert {r.value for r in got if r.name == "db-0.db.default.svc.cluster.local."} == {
        "10.244.0.4",
        "10.244.0.5",
    }


def test_names_are_lower_case_and_absolute() -> None:
    got = service_records(svc("web", "Team-A", clusterIP="10.96.0.1"), [], "Cluster.Local")
    assert {r.name for r in got if r.type == "A"} == {"web.team-a.svc.cluster.local."}


def test_pod_records_both_spec_forms_and_ptr() -> None:
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns1"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.244.1.5"}, {"ip": "fd00::1:5"}]},
        }
    )
    assert pod_records(pod, D) == {
        R("10-244-1-5.ns1.pod.cluster.local.", "A", "10.244.1.5"),
        R("10-244-1-5.pod.cluster.local.", "A", "10.244.1.5"),
        R("5.1.244.10.in-addr.arpa.", "PTR", "10-244-1-5.ns1.pod.cluster.local."),
        R("fd00--1-5.ns1.pod.cluster.local.", "AAAA", "fd00::1:5"),
        R("fd00--1-5.pod.cluster.local.", "AAAA", "fd00::1:5"),
        R(reverse_name("fd00::1:5"), "PTR", "fd00--1-5.ns1.pod.cluster.local."),
    }


@pytest.mark.parametrize(
    ("phase", "host_network", "ips"),
    [("Succeeded", False, ["10.0.0.1"]), ("Failed", False, ["10.0.0.1"]), ("Running", True, ["10.0.0.1"]),
     ("Pending", False, [])],
)  # fmt: skip
def test_pods_without_records(phase: str, host_network: bool, ips: list[str]) -> None:
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"hostNetwork": host_network},
            "status": {"phase": phase, "podIPs": [{"ip": i} for i in ips]},
        }
    )
    assert pod_records(pod, D) == frozenset()


def test_version_record_and_helpers() -> None:
    assert version_records(D) == {R("dns-version.cluster.local.", "TXT", '"1.1.0"')}
    assert dashed("10.1.2.3") == "10-1-2-3"
    assert reverse_name("10.96.0.10") == "10.0.96.10.in-addr.arpa."
    assert reverse_name("fd00::1").endswith(".ip6.arpa.") and reverse_name("fd00::1").startswith("1.0.0.0.")
