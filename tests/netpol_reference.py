"""A reference evaluator of the policy APIs' semantics, independent of the translation (pure, small).

It reads the API objects as JSON (dicts) and answers whether a connection from one pod to another
(protocol, port) is allowed, as the APIs define it:

- networking.k8s.io/v1 NetworkPolicy: a pod is isolated in a direction when a policy selecting it
  has that policyType (policyTypes absent: Ingress, plus Egress when the policy has egress rules);
  an isolated pod admits only what some rule of those policies allows (rules are unions); a rule
  with no peers matches every peer, with no ports every port; a named port is the destination
  pod's container port of that name and protocol.
- policy.networking.k8s.io/v1alpha1 AdminNetworkPolicy: evaluated first, by spec.priority (lower
  first); in one ANP the rules of a direction in order; the first matching rule decides: Allow,
  Deny, or Pass (skip the remaining ANPs, go to NetworkPolicy).
- BaselineAdminNetworkPolicy: only for a direction no NetworkPolicy isolates; first matching rule.
- Nothing matched: allowed.

A connection is allowed when the source's egress and the destination's ingress both are.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAME_LABEL = "kubernetes.io/metadata.name"
Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: str
    ports: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """Named container ports: name → (protocol, number)."""


@dataclass
class World:
    pods: Sequence[Pod]
    namespaces: Mapping[str, Mapping[str, str]]
    """Namespace labels (the name label is added)."""
    network_policies: Sequence[Obj] = ()
    admin_policies: Sequence[Obj] = ()
    baseline: Obj | None = None

    def ns_labels(self, ns: str) -> dict[str, str]:
        return {**self.namespaces.get(ns, {}), NAME_LABEL: ns}


def selects(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty one selects everything."""
    if selector is None:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or ():
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def allowed(w: World, src: Pod, dst: Pod, protocol: str, port: int) -> bool:
    return _direction(w, "egress", src, dst, protocol, port) and _direction(
        w, "ingress", dst, src, protocol, port
    )


def _direction(w: World, d: str, subject: Pod, peer: Pod, protocol: str, port: int) -> bool:
    """Whether `subject`'s policies in direction `d` admit the connection with `peer`."""
    dst = subject if d == "ingress" else peer
    for anp in sorted(w.admin_policies, key=lambda a: int(a["spec"]["priority"])):
        if not _anp_subject(w, anp["spec"]["subject"], subject):
            continue
        action = _first_match(w, anp["spec"].get(d) or (), d, peer, dst, protocol, port)
        if action == "Allow":
            return True
        if action == "Deny":
            return False
        if action == "Pass":
            break
    isolating = [p for p in w.network_policies if _np_isolates(p, d, subject)]
    if isolating:
        return any(
            _np_rule(w, p, r, d, peer, dst, protocol, port) for p in isolating for r in _np_rules(p, d)
        )
    if w.baseline is not None and _anp_subject(w, w.baseline["spec"]["subject"], subject):
        action = _first_match(w, w.baseline["spec"].get(d) or (), d, peer, dst, protocol, port)
        if action is not None:
            return action == "Allow"
    return True


# NetworkPolicy


def _np_types(p: Obj) -> set[str]:
    spec = p["spec"]
    types = spec.get("policyTypes")
    if types:
        return {t.lower() for t in types}
    return {"ingress", "egress"} if spec.get("egress") else {"ingress"}


def _np_isolates(p: Obj, d: str, pod: Pod) -> bool:
    meta, spec = p["metadata"], p["spec"]
    return (
        meta["namespace"] == pod.namespace
        and d in _np_types(p)
        and selects(spec.get("podSelector"), pod.labels)
    )


def _np_rules(p: Obj, d: str) -> Iterable[Obj]:
    return p["spec"].get(d) or ()


def _np_rule(w: World, p: Obj, rule: Obj, d: str, peer: Pod, dst: Pod, protocol: str, port: int) -> bool:
    peers = rule.get("from" if d == "ingress" else "to") or []
    if peers and not any(_np_peer(w, p["metadata"]["namespace"], q, peer) for q in peers):
        return False
    ports = rule.get("ports") or []
    return not ports or any(_np_port(q, dst, protocol, port) for q in ports)


def _np_peer(w: World, ns: str, q: Obj, peer: Pod) -> bool:
    if "ipBlock" in q:
        block = q["ipBlock"]
        ip = ipaddress.ip_address(peer.ip)
        inside = ip in ipaddress.ip_network(block["cidr"])
        return inside and not any(ip in ipaddress.ip_network(e) for e in block.get("except") or ())
    nsel, psel = q.get("namespaceSelector"), q.get("podSelector")
    in_ns = peer.namespace == ns if nsel is None else selects(nsel, w.ns_labels(peer.namespace))
    return in_ns and selects(psel, peer.labels)


def _np_port(q: Obj, dst: Pod, protocol: str, port: int) -> bool:
    proto = q.get("protocol", "TCP")
    if proto != protocol:
        return False
    want = q.get("port")
    if want is None:
        return True
    if isinstance(want, str):
        return dst.ports.get(want) == (protocol, port)
    return int(want) <= port <= int(q.get("endPort") or want)


# AdminNetworkPolicy / BaselineAdminNetworkPolicy


def _anp_subject(w: World, subject: Obj, pod: Pod) -> bool:
    if "namespaces" in subject:
        return selects(subject["namespaces"], w.ns_labels(pod.namespace))
    pods = subject["pods"]
    return selects(pods["namespaceSelector"], w.ns_labels(pod.namespace)) and selects(
        pods["podSelector"], pod.labels
    )


def _first_match(
    w: World, rules: Iterable[Obj], d: str, peer: Pod, dst: Pod, protocol: str, port: int
) -> str | None:
    for rule in rules:
        peers = rule.get("from" if d == "ingress" else "to") or []
        if not any(_anp_peer(w, q, peer) for q in peers):
            continue
        ports = rule.get("ports")
        if ports is None or any(_anp_port(q, dst, protocol, port) for q in ports):
            return str(rule["action"])
    return None


def _anp_peer(w: World, q: Obj, peer: Pod) -> bool:
    if "namespaces" in q:
        return selects(q["namespaces"], w.ns_labels(peer.namespace))
    if "pods" in q:
        return _anp_subject(w, q, peer)
    if "networks" in q:
        ip = ipaddress.ip_address(peer.ip)
        return any(ip in ipaddress.ip_network(n) for n in q["networks"])
    return False  # nodes: a pod is not a node


def _anp_port(q: Obj, dst: Pod, protocol: str, port: int) -> bool:
    if "portNumber" in q:
        n = q["portNumber"]
        return bool(n.get("protocol", "TCP") == protocol and int(n["port"]) == port)
    if "namedPort" in q:
        return dst.ports.get(q["namedPort"]) == (protocol, port)
    r = q["portRange"]
    return bool(r.get("protocol", "TCP") == protocol and int(r["start"]) <= port <= int(r["end"]))
