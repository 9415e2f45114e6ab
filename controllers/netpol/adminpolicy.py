"""policy.networking.k8s.io/v1alpha1 AdminNetworkPolicy and BaselineAdminNetworkPolicy, parsed and
validated once into a typed model (pure), as policy.py does for NetworkPolicy.

The CRDs (daemonsets/policy/, network-policy-api v0.1.7 experimental channel) are validated by the API
server; this parser does not rely on it: a bad value raises InvalidPolicy for the whole policy.
Peers follow the API's "fail closed" rule: a peer with no field this controller knows (a newer CRD)
or a `domainNames` peer (not implemented here) matches nothing in an Allow rule, and everything in a
Deny or Pass rule; `unsupported` names such fields for the status condition.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from controllers.machinery import Kind
from controllers.netpol.acl_logging import OFF, LogSetting, setting_or_off
from controllers.netpol.policy import (
    Direction,
    InvalidPolicy,
    Network,
    Protocol,
    Selector,
    _mapping,
    _sequence,
)

Action = Literal["Allow", "Deny", "Pass"]
PeerKind = Literal["namespaces", "pods", "nodes", "networks", "all"]
ANP_GROUP = "policy.networking.k8s.io"


@dataclass(frozen=True, slots=True)
class Subject:
    """The pods a policy applies to: every pod of the selected namespaces (pod_selector None), or
    the selected pods of the selected namespaces."""

    namespace_selector: Selector
    pod_selector: Selector | None = None


@dataclass(frozen=True, slots=True)
class AdminPeer:
    kind: PeerKind
    """`all`: the fail-closed stand-in for a peer this controller cannot express (every address)."""
    namespace_selector: Selector | None = None
    pod_selector: Selector | None = None
    node_selector: Selector | None = None
    networks: tuple[Network, ...] = ()


@dataclass(frozen=True, slots=True)
class AdminPort:
    """portNumber (start == end), portRange (start <= end) or namedPort (name)."""

    protocol: Protocol = "TCP"
    start: int = 0
    end: int = 0
    name: str = ""


@dataclass(frozen=True, slots=True)
class AdminRule:
    name: str
    action: Action
    peers: tuple[AdminPeer, ...]
    ports: tuple[AdminPort, ...] = ()
    """Empty: every port and protocol."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminPolicy:
    name: str
    priority: int | None
    """0-99 for an AdminNetworkPolicy (lower = earlier); None for the BaselineAdminNetworkPolicy."""
    subject: Subject
    ingress: tuple[AdminRule, ...] = ()
    egress: tuple[AdminRule, ...] = ()
    unsupported: tuple[str, ...] = ()
    logging: LogSetting = OFF
    """Verdict logging, from the policy's acl_logging.ANNOTATION."""

    @property
    def baseline(self) -> bool:
        return self.priority is None

    @property
    def key(self) -> str:
        return f"{'banp' if self.baseline else 'anp'}:{self.name}"

    def rules(self, direction: Direction) -> tuple[AdminRule, ...]:
        return self.ingress if direction == "Ingress" else self.egress


def parse_admin(obj: Mapping[str, Any], *, baseline: bool) -> AdminPolicy:
    """The typed ANP (baseline False) or BANP, or InvalidPolicy naming the first bad field."""
    meta, spec = _mapping(obj.get("metadata"), "metadata"), _mapping(obj.get("spec"), "spec")
    name = str(meta.get("name", ""))
    priority = None
    if not baseline:
        priority = spec.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 1000:
            raise InvalidPolicy(f"spec.priority: {priority!r} is not in 0-1000")
    elif name != "default":
        raise InvalidPolicy('metadata.name: only the BaselineAdminNetworkPolicy named "default" applies')
    unsupported: list[str] = []
    ingress = _rules(spec.get("ingress"), "spec.ingress", "from", baseline, unsupported)
    egress = _rules(spec.get("egress"), "spec.egress", "to", baseline, unsupported)
    return AdminPolicy(name=name, priority=priority, subject=_subject(spec.get("subject")),
                       ingress=ingress, egress=egress, unsupported=tuple(unsupported),
                       logging=setting_or_off(meta.get("annotations")))  # fmt: skip


def _subject(value: object) -> Subject:
    d = _mapping(value, "spec.subject")
    if ("namespaces" in d) == ("pods" in d):
        raise InvalidPolicy("spec.subject: exactly one of namespaces or pods")
    if "namespaces" in d:
        return Subject(Selector.parse(d["namespaces"], "spec.subject.namespaces"))
    pods = _mapping(d["pods"], "spec.subject.pods")
    return Subject(Selector.parse(pods.get("namespaceSelector"), "spec.subject.pods.namespaceSelector"),
                   Selector.parse(pods.get("podSelector"), "spec.subject.pods.podSelector"))  # fmt: skip


def _rules(
    value: object, where: str, side: str, baseline: bool, unsupported: list[str]
) -> tuple[AdminRule, ...]:
    actions = ("Allow", "Deny") if baseline else ("Allow", "Deny", "Pass")
    rules = _sequence(value, where)
    if len(rules) > 100:
        raise InvalidPolicy(f"{where}: at most 100 rules")
    out = []
    for i, r in enumerate(rules):
        at = f"{where}[{i}]"
        rule = _mapping(r, at)
        action = rule.get("action")
        if action not in actions:
            raise InvalidPolicy(f"{at}.action: {action!r} is not one of {', '.join(actions)}")
        peers = _sequence(rule.get(side), f"{at}.{side}")
        if not peers:
            raise InvalidPolicy(f"{at}.{side}: at least one peer")
        parsed = tuple(_peer(p, f"{at}.{side}[{j}]", cast(Action, action), side == "to", unsupported)
                       for j, p in enumerate(peers))  # fmt: skip
        ports = tuple(
            _port(p, f"{at}.ports[{j}]") for j, p in enumerate(_sequence(rule.get("ports"), f"{at}.ports"))
        )
        out.append(AdminRule(str(rule.get("name", "")), cast(Action, action), parsed, ports))
    return tuple(out)


def _peer(value: object, where: str, action: Action, egress: bool, unsupported: list[str]) -> AdminPeer:
    d = _mapping(value, where)
    if len(d) != 1:
        raise InvalidPolicy(f"{where}: exactly one peer field")
    ((field, v),) = d.items()
    if field == "namespaces":
        return AdminPeer("namespaces", namespace_selector=Selector.parse(v, f"{where}.namespaces"))
    if field == "pods":
        pods = _mapping(v, f"{where}.pods")
        nss = Selector.parse(pods.get("namespaceSelector"), f"{where}.pods.namespaceSelector")
        pod = Selector.parse(pods.get("podSelector"), f"{where}.pods.podSelector")
        return AdminPeer("pods", namespace_selector=nss, pod_selector=pod)
    if field == "nodes" and egress:
        return AdminPeer("nodes", node_selector=Selector.parse(v, f"{where}.nodes"))
    if field == "networks" and egress:
        nets = _sequence(v, f"{where}.networks")
        if not nets:
            raise InvalidPolicy(f"{where}.networks: at least one CIDR")
        return AdminPeer(
            "networks", networks=tuple(_cidr(n, f"{where}.networks[{k}]") for k, n in enumerate(nets))
        )
    unsupported.append(f"{where}.{field}")  # domainNames, or a field of a newer API: fail closed
    return AdminPeer("networks") if action == "Allow" else AdminPeer("all")


def _cidr(value: object, where: str) -> Network:
    if not isinstance(value, str) or "/" not in value:
        raise InvalidPolicy(f"{where}: {value!r} is not a CIDR")
    try:
        return ipaddress.ip_network(value, strict=False)
    except ValueError as e:
        raise InvalidPolicy(f"{where}: {value!r} is not a CIDR") from e


def _port(value: object, where: str) -> AdminPort:
    d = _mapping(value, where)
    if len(d) != 1:
        raise InvalidPolicy(f"{where}: exactly one of portNumber, namedPort, portRange")
    ((field, v),) = d.items()
    if field == "namedPort":
        if not isinstance(v, str) or not v:
            raise InvalidPolicy(f"{where}.namedPort: expected a port name")
        return AdminPort(name=v)
    spec = _mapping(v, f"{where}.{field}")
    proto = spec.get("protocol") or "TCP"
    if proto not in ("TCP", "UDP", "SCTP"):
        raise InvalidPolicy(f"{where}.{field}.protocol: {proto!r} is not TCP, UDP or SCTP")
    if field == "portNumber":
        start = end = _number(spec.get("port"), f"{where}.portNumber.port")
    elif field == "portRange":
        start, end = (
            _number(spec.get("start"), f"{where}.portRange.start"),
            _number(spec.get("end"), f"{where}.portRange.end"),
        )
        if start >= end:
            raise InvalidPolicy(f"{where}.portRange: start must be less than end")
    else:
        raise InvalidPolicy(f"{where}: unknown port field {field!r}")
    return AdminPort(cast(Protocol, proto), start, end)


def _number(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        raise InvalidPolicy(f"{where}: {value!r} is not in 1-65535")
    return value


ADMIN_NETWORK_POLICIES = Kind(
    ANP_GROUP, "v1alpha1", "adminnetworkpolicies", "AdminNetworkPolicy", namespaced=False
)
BASELINE_ADMIN_NETWORK_POLICIES = Kind(
    ANP_GROUP, "v1alpha1", "baselineadminnetworkpolicies", "BaselineAdminNetworkPolicy", namespaced=False
)
