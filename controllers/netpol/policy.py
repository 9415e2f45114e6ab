"""networking.k8s.io/v1 NetworkPolicy, parsed and validated once into a typed model (pure).

The API server validates NetworkPolicies before storing them, but this controller does not
trust that (an older server, or a test double, may store anything): every value the
translation relies on is checked here, and a policy with any bad value raises
`InvalidPolicy` as a whole, so it is never half-applied.

Defaults follow the API's (`SetDefaults_NetworkPolicySpec`): without `policyTypes`, a policy
is an Ingress policy, and also an Egress one when it has egress rules; a port without a
protocol is TCP.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self, cast

Direction = Literal["Ingress", "Egress"]
Protocol = Literal["TCP", "UDP", "SCTP"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")
"""IANA_SVC_NAME: at most 15 lowercase alphanumerics and '-', at least one letter."""


class InvalidPolicy(ValueError):
    """A NetworkPolicy this controller will not apply (the message names the field)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class Selector:
    """A metav1.LabelSelector; the empty selector selects everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.expressions
        )

    @classmethod
    def parse(cls, value: object, where: str) -> Self:
        d = _mapping(value, where)
        labels = _mapping(d.get("matchLabels"), f"{where}.matchLabels")
        reqs = []
        for i, e in enumerate(_sequence(d.get("matchExpressions"), f"{where}.matchExpressions")):
            req = _mapping(e, f"{where}.matchExpressions[{i}]")
            op, values = req.get("operator"), req.get("values") or []
            if op not in _OPERATORS or not isinstance(req.get("key"), str) or not req["key"]:
                raise InvalidPolicy(f"{where}.matchExpressions[{i}]: bad key or operator {op!r}")
            if not isinstance(values, list) or (op in ("In", "NotIn")) != bool(values):
                raise InvalidPolicy(f"{where}.matchExpressions[{i}]: values do not fit operator {op}")
            reqs.append(Requirement(req["key"], str(op), frozenset(str(v) for v in values)))
        return cls(tuple(sorted((str(k), str(v)) for k, v in labels.items())), tuple(reqs))


@dataclass(frozen=True, slots=True)
class IpBlock:
    cidr: Network
    excepts: tuple[Network, ...] = ()


@dataclass(frozen=True, slots=True)
class Peer:
    """One entry of `from`/`to`: pods (by pod and/or namespace selector) or an ipBlock."""

    pod_selector: Selector | None = None
    namespace_selector: Selector | None = None
    ip_block: IpBlock | None = None


@dataclass(frozen=True, slots=True)
class PortSpec:
    protocol: Protocol = "TCP"
    port: int | str | None = None
    """A number, a container port name, or None for every port of the protocol."""
    end_port: int | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    peers: tuple[Peer, ...] = ()
    """Empty: every source (ingress) or destination (egress)."""
    ports: tuple[PortSpec, ...] = ()
    """Empty: every port and protocol."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPolicy:
    namespace: str
    name: str
    pod_selector: Selector
    types: frozenset[Direction]
    ingress: tuple[Rule, ...] = ()
    egress: tuple[Rule, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def rules(self, direction: Direction) -> tuple[Rule, ...]:
        return self.ingress if direction == "Ingress" else self.egress


def parse_policy(obj: Mapping[str, Any]) -> NetworkPolicy:
    """The typed policy, or InvalidPolicy naming the first bad field."""
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    ingress = _rules(spec.get("ingress"), "spec.ingress", "from")
    egress = _rules(spec.get("egress"), "spec.egress", "to")
    raw_types = _sequence(spec.get("policyTypes"), "spec.policyTypes")
    if any(t not in ("Ingress", "Egress") for t in raw_types):
        raise InvalidPolicy(f"spec.policyTypes: unknown type in {raw_types}")
    types: frozenset[Direction] = frozenset(raw_types) or frozenset(
        ("Ingress", "Egress") if spec.get("egress") else ("Ingress",)
    )
    return NetworkPolicy(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        pod_selector=Selector.parse(spec.get("podSelector"), "spec.podSelector"),
        types=types,
        ingress=ingress,
        egress=egress,
    )


def _rules(value: object, where: str, peers_field: str) -> tuple[Rule, ...]:
    rules = []
    for i, r in enumerate(_sequence(value, where)):
        rw = f"{where}[{i}]"
        rule = _mapping(r, rw)
        peers = tuple(
            _peer(p, f"{rw}.{peers_field}[{j}]")
            for j, p in enumerate(_sequence(rule.get(peers_field), f"{rw}.{peers_field}"))
        )
        ports = tuple(
            _port(p, f"{rw}.ports[{j}]") for j, p in enumerate(_sequence(rule.get("ports"), f"{rw}.ports"))
        )
        rules.append(Rule(peers, ports))
    return tuple(rules)


def _peer(value: object, where: str) -> Peer:
    d = _mapping(value, where)
    pods, nss, block = d.get("podSelector"), d.get("namespaceSelector"), d.get("ipBlock")
    if block is not None:
        if pods is not None or nss is not None:
            raise InvalidPolicy(f"{where}: ipBlock cannot be combined with a selector")
        return Peer(ip_block=_ip_block(block, f"{where}.ipBlock"))
    if pods is None and nss is None:
        raise InvalidPolicy(f"{where}: needs podSelector, namespaceSelector or ipBlock")
    return Peer(
        pod_selector=None if pods is None else Selector.parse(pods, f"{where}.podSelector"),
        namespace_selector=None if nss is None else Selector.parse(nss, f"{where}.namespaceSelector"),
    )


def _ip_block(value: object, where: str) -> IpBlock:
    d = _mapping(value, where)
    cidr = _network(d.get("cidr"), f"{where}.cidr")
    excepts = tuple(_network(e, f"{where}.except") for e in _sequence(d.get("except"), f"{where}.except"))
    for e in excepts:
        if e.version != cidr.version or not e.subnet_of(cidr) or e == cidr:  # type: ignore[arg-type]
            raise InvalidPolicy(f"{where}.except: {e} is not a strict subnet of {cidr}")
    return IpBlock(cidr, excepts)


def _network(value: object, where: str) -> Network:
    try:
        return ipaddress.ip_network(str(value), strict=False) if isinstance(value, str) else _bad(where)
    except ValueError as e:
        raise InvalidPolicy(f"{where}: {value!r} is not a CIDR") from e


def _port(value: object, where: str) -> PortSpec:
    d = _mapping(value, where)
    proto = d.get("protocol") or "TCP"
    if proto not in ("TCP", "UDP", "SCTP"):
        raise InvalidPolicy(f"{where}.protocol: {proto!r} is not TCP, UDP or SCTP")
    port, end = d.get("port"), d.get("endPort")
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if isinstance(port, str):
        if not _PORT_NAME.match(port):
            raise InvalidPolicy(f"{where}.port: {port!r} is not a valid port name")
        if end is not None:
            raise InvalidPolicy(f"{where}.endPort: needs a numeric port")
    elif port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
        raise InvalidPolicy(f"{where}.port: {port!r} is not in 1-65535")
    if end is not None and not (isinstance(end, int) and isinstance(port, int) and port <= end <= 65535):
        raise InvalidPolicy(f"{where}.endPort: {end!r} must be a number from port to 65535")
    return PortSpec(cast(Protocol, proto), port, end)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPolicy(f"{where}: expected an object")
    return value


def _sequence(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidPolicy(f"{where}: expected a list")
    return value


def _bad(where: str) -> Network:
    raise InvalidPolicy(f"{where}: expected a CIDR string")
