"""Typed views of the Kubernetes objects the controllers read: parsed once from the API's JSON.

Informer caches hold plain dicts exactly as the API serves them; a controller turns a dict into
one of these frozen dataclasses at its edge (`Service.from_dict(obj)`) and never passes the raw
dict further. Parsing is lenient about absent optional fields (the API omits empty ones) and
strict about nothing else: validation of values belongs to the controller that uses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class MalformedObject(ValueError):
    """A field holds what the API's schema never allows (kube-apiserver validates it; a replica, a
    cache or an API double may not): the reconcile fails with this, as a Warning Event naming it."""


def _int(value: object, where: str, default: int = 0) -> int:
    """An integer field (absent, null or 0 means `default`); MalformedObject for anything else."""
    if value is None or value == 0 or value == "":
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise MalformedObject(f"{where}: {value!r:.80} is not an integer")


def _map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectRef:
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServicePort:
    name: str = ""
    protocol: str = "TCP"
    port: int = 0
    target_port: int | str = 0
    """A number, or the name of a container port (resolved through the EndpointSlice)."""
    node_port: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        port = _int(d.get("port"), "spec.ports[].port")
        target = d.get("targetPort", port)
        target_port: int | str = (
            target
            if isinstance(target, str) and target and not (target.isascii() and target.isdigit())
            else _int(target, "spec.ports[].targetPort")
        )
        return cls(
            name=str(d.get("name", "")),
            protocol=str(d.get("protocol", "TCP") or "TCP"),
            port=port,
            target_port=target_port,
            node_port=_int(d.get("nodePort"), "spec.ports[].nodePort"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Service:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    type: str = "ClusterIP"
    cluster_ips: tuple[str, ...] = ()
    """spec.clusterIPs (or clusterIP); empty, or ("None",) for a headless Service."""
    ports: tuple[ServicePort, ...] = ()
    selector: dict[str, str] = field(default_factory=dict)
    load_balancer_class: str = ""
    load_balancer_ip: str = ""
    """spec.loadBalancerIP (deprecated upstream, still honoured)."""
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    ingress_ips: tuple[str, ...] = ()
    """status.loadBalancer.ingress[].ip"""
    conditions: tuple[Mapping[str, Any], ...] = ()
    """status.conditions as served."""
    external_name: str = ""
    publish_not_ready_addresses: bool = False
    deletion_timestamp: str = ""
    finalizers: tuple[str, ...] = ()
    session_affinity: str = "None"
    """"None" or "ClientIP"."""
    session_affinity_timeout: int = 10800
    """spec.sessionAffinityConfig.clientIP.timeoutSeconds (Kubernetes' default: 3 h)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def headless(self) -> bool:
        return self.cluster_ips[:1] == ("None",)

    @property
    def cluster_ip(self) -> str:
        return "" if self.headless or not self.cluster_ips else self.cluster_ips[0]

    @property
    def deleting(self) -> bool:
        return bool(self.deletion_timestamp)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Self:
        meta, spec, status = _dict(obj.get("metadata")), _dict(obj.get("spec")), _dict(obj.get("status"))
        ips = tuple(str(i) for i in _list(spec.get("clusterIPs")))
        if not ips and spec.get("clusterIP"):
            ips = (str(spec["clusterIP"]),)
        client_ip = _dict(_dict(spec.get("sessionAffinityConfig")).get("clientIP"))
        ingress = _list(_dict(status.get("loadBalancer")).get("ingress"))
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            resource_version=str(meta.get("resourceVersion", "")),
            type=str(spec.get("type", "ClusterIP") or "ClusterIP"),
            cluster_ips=ips,
            ports=tuple(ServicePort.from_dict(_dict(p)) for p in _list(spec.get("ports"))),
            selector=_map(spec.get("selector")),
            load_balancer_class=str(spec.get("loadBalancerClass", "") or ""),
            load_balancer_ip=str(spec.get("loadBalancerIP", "") or ""),
            annotations=_map(meta.get("annotations")),
            labels=_map(meta.get("labels")),
            ingress_ips=tuple(str(_dict(i).get("ip")) for i in ingress if _dict(i).get("ip")),
            conditions=tuple(_dict(c) for c in _list(status.get("conditions"))),
            external_name=str(spec.get("externalName", "") or ""),
            publish_not_ready_addresses=bool(spec.get("publishNotReadyAddresses", False)),
            deletion_timestamp=str(meta.get("deletionTimestamp", "") or ""),
            finalizers=tuple(str(f) for f in _list(meta.get("finalizers"))),
            session_affinity=str(spec.get("sessionAffinity", "None") or "None"),
            session_affinity_timeout=_int(
                client_ip.get("timeoutSeconds"), "spec.sessionAffinityConfig.clientIP.timeoutSeconds", 10800
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    addresses: tuple[str, ...]
    ready: bool = True
    """conditions.ready; an absent value means ready (discovery.k8s.io/v1)."""
    serving: bool = True
    """conditions.serving; absent means the value of ready."""
    terminating: bool = False
    hostname: str = ""
    node_name: str = ""
    target_ref: ObjectRef | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        cond = _dict(d.get("conditions"))
        ready = cond.get("ready")
        serving = cond.get("serving")
        ref = d.get("targetRef")
        return cls(
            addresses=tuple(str(a) for a in _list(d.get("addresses"))),
            ready=True if ready is None else bool(ready),
            serving=(True if ready is None else bool(ready)) if serving is None else bool(serving),
            terminating=bool(cond.get("terminating", False)),
            hostname=str(d.get("hostname", "") or ""),
            node_name=str(d.get("nodeName", "") or ""),
            target_ref=(
                ObjectRef(
                    kind=str(ref.get("kind", "")),
                    namespace=str(ref.get("namespace", "")),
                    name=str(ref.get("name", "")),
                    uid=str(ref.get("uid", "")),
                )
                if isinstance(ref, Mapping)
                else None
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointPort:
    name: str = ""
    protocol: str = "TCP"
    port: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return cls(
            name=str(d.get("name", "") or ""),
            protocol=str(d.get("protocol", "TCP") or "TCP"),
            port=_int(d.get("port"), "ports[].port"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointSlice:
    namespace: str
    name: str
    service_name: str = ""
    """From the `kubernetes.io/service-name` label."""
    address_type: str = "IPv4"
    endpoints: tuple[Endpoint, ...] = ()
    ports: tuple[EndpointPort, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def service_key(self) -> str:
        return f"{self.namespace}/{self.service_name}" if self.service_name else ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Self:
        meta = _dict(obj.get("metadata"))
        labels = _map(meta.get("labels"))
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            service_name=labels.get(SERVICE_NAME_LABEL, ""),
            address_type=str(obj.get("addressType", "IPv4")),
            endpoints=tuple(Endpoint.from_dict(_dict(e)) for e in _list(obj.get("endpoints"))),
            ports=tuple(EndpointPort.from_dict(_dict(p)) for p in _list(obj.get("ports"))),
            labels=labels,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerPort:
    name: str = ""
    container_port: int = 0
    protocol: str = "TCP"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    ips: tuple[str, ...] = ()
    phase: str = ""
    node_name: str = ""
    ports: tuple[ContainerPort, ...] = ()
    """Every container's declared ports."""
    host_network: bool = False
    """spec.hostNetwork: the pod's IPs are the node's."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Self:
        meta, spec, status = _dict(obj.get("metadata")), _dict(obj.get("spec")), _dict(obj.get("status"))
        ips = tuple(str(_dict(i).get("ip")) for i in _list(status.get("podIPs")) if _dict(i).get("ip"))
        if not ips and status.get("podIP"):
            ips = (str(status["podIP"]),)
        ports = tuple(
            ContainerPort(
                name=str(_dict(p).get("name", "") or ""),
                container_port=_int(_dict(p).get("containerPort"), "spec.containers[].ports[].containerPort"),
                protocol=str(_dict(p).get("protocol", "TCP") or "TCP"),
            )
            for c in _list(spec.get("containers"))
            for p in _list(_dict(c).get("ports"))
        )
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            labels=_map(meta.get("labels")),
            ips=ips,
            phase=str(status.get("phase", "") or ""),
            node_name=str(spec.get("nodeName", "") or ""),
            ports=ports,
            host_network=bool(spec.get("hostNetwork", False)),
        )
