"""What kube-scheduler does for the runner's cluster: bind a Pod to one Node, or leave it Pending
and Unschedulable with the scheduler's own message.

Filters (a Node failing one is out, counted under the scheduler's reason for it):
- NodeAffinity, its nodeSelector part: the Node's labels hold every key/value of the Pod's;
- NodePorts: none of the Pod's host ports (protocol, port) is used by a Pod bound to the Node;
- InterPodAffinity, required anti-affinity: no Pod bound to a Node of the same topology value
  (`topologyKey`, a Node label) matches one of the Pod's `requiredDuringScheduling...` terms
  (labelSelector with matchLabels/matchExpressions, namespaces or the Pod's own), and the Pod
  does not match a term of such a Pod's (the symmetry the scheduler checks too).
Score (the best Node wins, ties by name): preferred anti-affinity terms matched on the Node cost
their weight, then the default spreading (fewer Pods of the same owner, then fewer Pods).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
Port = tuple[str, int]
REASONS = {
    "selector": "node(s) didn't match Pod's node affinity/selector",
    "ports": "node(s) didn't have free ports for the requested pod ports",
    "anti": "node(s) didn't match pod anti-affinity rules",
}


def host_ports(pod: Obj) -> set[Port]:
    spec = pod["spec"]
    return {
        (p.get("protocol", "TCP"), int(p["hostPort"]))
        for c in spec.get("initContainers", []) + spec.get("containers", [])
        for p in c.get("ports") or []
        if p.get("hostPort")
    }


def fits(pod_spec: Obj, node: Obj) -> bool:
    """The Pod's nodeSelector matches the Node's labels."""
    labels = node["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in (pod_spec.get("nodeSelector") or {}).items())


def matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op)  # fmt: skip
        if not ok:
            return False
    return True


def _anti_terms(pod: Obj, kind: str) -> list[Obj]:
    anti = ((pod["spec"].get("affinity") or {}).get("podAntiAffinity")) or {}
    return list(anti.get(f"{kind}DuringSchedulingIgnoredDuringExecution") or [])


def _term_matches(term: Obj, owner: Obj, other: Obj) -> bool:
    """`other` is a Pod the anti-affinity term of `owner` (a Pod) selects."""
    namespaces = term.get("namespaces") or [owner["metadata"].get("namespace", "default")]
    meta = other["metadata"]
    return meta.get("namespace", "default") in namespaces and matches(
        term.get("labelSelector") or {}, meta.get("labels") or {}
    )


def _owner(pod: Obj) -> str:
    refs = pod["metadata"].get("ownerReferences") or []
    return str(refs[0].get("uid") or refs[0].get("name")) if refs else ""


@dataclass
class Cluster:
    """The Nodes and the Pods bound to them, as the scheduler's cache holds them."""

    nodes: list[Obj]
    bound: dict[str, list[Obj]] = field(default_factory=dict)
    """Node name -> the Pods bound to it."""

    @classmethod
    def of(cls, nodes: list[Obj], pods: Iterable[Obj]) -> Cluster:
        c = cls(nodes)
        for p in pods:
            if p["spec"].get("nodeName"):
                c.bind(p, p["spec"]["nodeName"])
        return c

    def bind(self, pod: Obj, node: str) -> None:
        self.bound.setdefault(node, []).append(pod)

    def _topology(self, node: Obj, key: str) -> list[Obj]:
        """Every Pod on a Node with the same value of label `key` as `node` (none without it)."""
        value = (node["metadata"].get("labels") or {}).get(key)
        if value is None:
            return []
        return [
            p
            for n in self.nodes
            if (n["metadata"].get("labels") or {}).get(key) == value
            for p in self.bound.get(n["metadata"]["name"], [])
        ]

    def _anti_ok(self, pod: Obj, node: Obj) -> bool:
        for term in _anti_terms(pod, "required"):
            if any(_term_matches(term, pod, p) for p in self._topology(node, term["topologyKey"])):
                return False
        for other in (p for ps in self.bound.values() for p in ps):  # their terms against this Pod
            for term in _anti_terms(other, "required"):
                on = self._topology(node, term["topologyKey"])
                if any(p is other for p in on) and _term_matches(term, other, pod):
                    return False
        return True

    def why_not(self, pod: Obj, node: Obj) -> str | None:
        """The filter `node` fails for `pod` (a key of REASONS), or None when it fits."""
        if not fits(pod["spec"], node):
            return "selector"
        used = {port for p in self.bound.get(node["metadata"]["name"], []) for port in host_ports(p)}
        if host_ports(pod) & used:
            return "ports"
        if not self._anti_ok(pod, node):
            return "anti"
        return None

    def score(self, pod: Obj, node: Obj) -> tuple[int, int, int, str]:
        name, here = node["metadata"]["name"], self.bound.get(node["metadata"]["name"], [])
        penalty = sum(
            int(t.get("weight", 1))
            for t in _anti_terms(pod, "preferred")
            if any(_term_matches(t["podAffinityTerm"], pod, p)
                   for p in self._topology(node, t["podAffinityTerm"]["topologyKey"]))
        )  # fmt: skip
        same = sum(1 for p in here if _owner(p) and _owner(p) == _owner(pod))
        return penalty, same, len(here), name

    def schedule(self, pod: Obj) -> tuple[str | None, str]:
        """(the Node the Pod is bound to, "") or (None, the scheduler's FailedScheduling message)."""
        failed: dict[str, int] = {}
        feasible = []
        for node in self.nodes:
            why = self.why_not(pod, node)
            if why is None:
                feasible.append(node)
            else:
                failed[why] = failed.get(why, 0) + 1
        if feasible:
            best = min(feasible, key=lambda n: self.score(pod, n))["metadata"]["name"]
            self.bind(pod, best)
            return best, ""
        n = len(self.nodes)
        parts = ", ".join(f"{count} {REASONS[why]}" for why, count in sorted(failed.items()))
        return None, f"0/{n} nodes are available: {parts}." if n else "0/0 nodes are available."
