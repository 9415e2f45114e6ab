"""Hypothesis strategies for policy scenarios: labels of a fixed set of pods and namespaces, and
NetworkPolicies over a small vocabulary (so selectors often match something), as API objects."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

NAMESPACES = ("gva", "gvb", "gvc")
Vocabulary = dict[str, tuple[str, ...]]
POD_KEYS: Vocabulary = {"app": ("web", "db"), "tier": ("1", "2")}
NS_KEYS: Vocabulary = {"team": ("x", "y")}
TCP_PORTS, UDP_PORTS = (8080, 9000), (5353,)
Obj = dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    pod_labels: tuple[dict[str, str], ...]
    """One label map per pod of the fixed layout, in its order."""
    ns_labels: dict[str, dict[str, str]]
    network_policies: tuple[Obj, ...]
    admin_policies: tuple[Obj, ...] = ()
    baseline: Obj | None = None


def labels(keys: Vocabulary) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in keys.items()})


def selector(keys: Vocabulary) -> st.SearchStrategy[Obj]:
    key = st.sampled_from(sorted(keys))
    match = key.flatmap(lambda k: st.sampled_from(keys[k]).map(lambda v: {"matchLabels": {k: v}}))
    expr = st.tuples(key, st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist"))).map(
        lambda t: {"matchExpressions": [{"key": t[0], "operator": t[1],
                                         **({"values": [keys[t[0]][0]]} if t[1] in ("In", "NotIn") else {})}]}
    )  # fmt: skip
    return st.one_of(st.just({}), match, expr)


def np_peer() -> st.SearchStrategy[Obj]:
    ns_keys: Vocabulary = {**NS_KEYS, "kubernetes.io/metadata.name": NAMESPACES}
    pods, spaces = selector(POD_KEYS), selector(ns_keys)
    return st.one_of(
        pods.map(lambda p: {"podSelector": p}),
        spaces.map(lambda n: {"namespaceSelector": n}),
        st.tuples(spaces, pods).map(lambda t: {"namespaceSelector": t[0], "podSelector": t[1]}),
    )


def np_port() -> st.SearchStrategy[Obj]:
    return st.sampled_from(
        [{"protocol": "TCP", "port": 8080}, {"protocol": "TCP", "port": 9000},
         {"protocol": "UDP", "port": 5353}, {"port": "http"},
         {"protocol": "TCP", "port": 8000, "endPort": 8999}, {"protocol": "UDP"}]
    )  # fmt: skip


def np_rule(direction: str) -> st.SearchStrategy[Obj]:
    side = "from" if direction == "ingress" else "to"
    return st.fixed_dictionaries(
        {}, optional={side: st.lists(np_peer(), max_size=2), "ports": st.lists(np_port(), max_size=2)}
    )


@st.composite
def network_policy(draw: st.DrawFn, name: str) -> Obj:
    spec: Obj = {"podSelector": draw(selector(POD_KEYS))}
    types = draw(st.sampled_from([None, ["Ingress"], ["Egress"], ["Ingress", "Egress"]]))
    if types is not None:
        spec["policyTypes"] = types
    for d in ("ingress", "egress"):
        if draw(st.booleans()):
            spec[d] = draw(st.lists(np_rule(d), max_size=2))
    ns = draw(st.sampled_from(NAMESPACES))
    meta = {"name": name, "namespace": ns}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta, "spec": spec}


@st.composite
def scenarios(draw: st.DrawFn, pods: int, max_policies: int = 3) -> Scenario:
    n = draw(st.integers(1, max_policies))
    return Scenario(
        pod_labels=tuple(draw(labels(POD_KEYS)) for _ in range(pods)),
        ns_labels={ns: draw(labels(NS_KEYS)) for ns in NAMESPACES},
        network_policies=tuple(draw(network_policy(f"gen{i}")) for i in range(n)),
    )


def anp_subject() -> st.SearchStrategy[Obj]:
    ns_keys: Vocabulary = {**NS_KEYS, "kubernetes.io/metadata.name": NAMESPACES}
    spaces, pods = selector(ns_keys), selector(POD_KEYS)
    return st.one_of(
        spaces.map(lambda n: {"namespaces": n}),
        st.tuples(spaces, pods).map(lambda t: {"pods": {"namespaceSelector": t[0], "podSelector": t[1]}}),
    )


def anp_port() -> st.SearchStrategy[Obj]:
    return st.sampled_from(
        [{"portNumber": {"protocol": "TCP", "port": 8080}}, {"portNumber": {"protocol": "UDP", "port": 5353}},
         {"portRange": {"protocol": "TCP", "start": 8500, "end": 9500}}, {"namedPort": "http"}]
    )  # fmt: skip


def anp_rule(direction: str, actions: tuple[str, ...], i: int) -> st.SearchStrategy[Obj]:
    side = "from" if direction == "ingress" else "to"
    return st.fixed_dictionaries(
        {
            "name": st.just(f"r{i}"),
            "action": st.sampled_from(actions),
            side: st.lists(anp_subject(), min_size=1, max_size=2),
        },
        optional={"ports": st.lists(anp_port(), min_size=1, max_size=2)},
    )


@st.composite
def admin_policy(draw: st.DrawFn, name: str, priority: int | None) -> Obj:
    """An AdminNetworkPolicy (priority given) or, priority None, the BaselineAdminNetworkPolicy."""
    actions = ("Allow", "Deny", "Pass") if priority is not None else ("Allow", "Deny")
    spec: Obj = {"subject": draw(anp_subject())}
    if priority is not None:
        spec["priority"] = priority
    for d in ("ingress", "egress"):
        n = draw(st.integers(0, 2))
        if n:
            spec[d] = [draw(anp_rule(d, actions, i)) for i in range(n)]
    kind = "AdminNetworkPolicy" if priority is not None else "BaselineAdminNetworkPolicy"
    return {
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


@st.composite
def admin_scenarios(draw: st.DrawFn, pods: int) -> Scenario:
    """A scenario with up to two ANPs (distinct priorities), maybe a BANP, and up to two NetworkPolicies."""
    base = draw(scenarios(pods, max_policies=2))
    # 0-99 (what the translation applies), never the platform's own 49/50 (equal priorities are undefined)
    free = [p for p in range(100) if p not in (49, 50)]
    priorities = draw(st.lists(st.sampled_from(free), min_size=0, max_size=2, unique=True))
    anps = tuple(draw(admin_policy(f"gen-anp{i}", p)) for i, p in enumerate(priorities))
    banp = draw(admin_policy("default", None)) if draw(st.booleans()) else None
    return dataclasses.replace(base, admin_policies=anps, baseline=banp)
