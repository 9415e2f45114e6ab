"""The reference evaluator against the APIs' documented examples (kubernetes.io NetworkPolicy
concepts page; the network-policy-api project's ANP/BANP user stories)."""

from __future__ import annotations

from typing import Any

from tests.netpol_reference import Pod, World, allowed, selects

DB = Pod("default", "db", {"role": "db"}, "10.244.0.10", {"redis": ("TCP", 6379)})
FRONTEND = Pod("default", "fe", {"role": "frontend"}, "10.244.0.11")
OTHER = Pod("default", "other", {"role": "other"}, "10.244.0.12")
MYPROJECT = Pod("myproject", "any", {"app": "x"}, "10.244.1.10")
MON = Pod("monitoring", "prom", {"app": "prometheus"}, "10.244.2.10")
SENSITIVE = Pod("sensitive", "vault", {"app": "vault"}, "10.244.3.10")
NAMESPACES = {"default": {}, "myproject": {"project": "myproject"}, "monitoring": {}, "sensitive": {}}
PODS = [DB, FRONTEND, OTHER, MYPROJECT, MON, SENSITIVE]


def np(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


def anp(name: str, priority: int, subject: dict[str, Any], **rules: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"priority": priority, "subject": subject, **rules}}


def world(
    nps: tuple[Any, ...] | list[Any] = (), anps: tuple[Any, ...] | list[Any] = (), banp: Any = None
) -> World:
    return World(PODS, NAMESPACES, nps, anps, banp)


# the "test-network-policy" of the NetworkPolicy concepts page (ipBlock part aside: pods here)
DOC_POLICY = np(
    "default", "test-network-policy",
    podSelector={"matchLabels": {"role": "db"}},
    policyTypes=["Ingress", "Egress"],
    ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                       {"podSelector": {"matchLabels": {"role": "frontend"}}}],
              "ports": [{"protocol": "TCP", "port": 6379}]}],
    egress=[{"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}], "ports": [{"protocol": "TCP", "port": 5978}]}],
)  # fmt: skip


def test_selectors() -> None:
    assert selects({}, {"a": "b"}) and selects(None, {})
    exprs = {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]},
                                  {"key": "b", "operator": "DoesNotExist"}]}  # fmt: skip
    assert (
        selects(exprs, {"a": "2"})
        and not selects(exprs, {"a": "3"})
        and not selects(exprs, {"a": "1", "b": ""})
    )
    assert selects({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {})


def test_the_documented_example_policy() -> None:
    w = world([DOC_POLICY])
    assert allowed(w, FRONTEND, DB, "TCP", 6379)
    assert allowed(w, MYPROJECT, DB, "TCP", 6379)
    assert not allowed(w, OTHER, DB, "TCP", 6379)  # neither peer
    assert not allowed(w, FRONTEND, DB, "TCP", 6380)  # other port
    assert not allowed(w, FRONTEND, DB, "UDP", 6379)  # protocol
    assert not allowed(w, DB, FRONTEND, "TCP", 80)  # db's egress isolated: only 10.0.0.0/24:5978
    assert allowed(w, FRONTEND, OTHER, "TCP", 80)  # pods no policy selects stay open


def test_and_versus_or_peers() -> None:
    both = np("default", "and", podSelector={"matchLabels": {"role": "db"}},
              ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"project": "myproject"}},
                                  "podSelector": {"matchLabels": {"role": "frontend"}}}]}])  # fmt: skip
    w = world([both])
    assert not allowed(w, MYPROJECT, DB, "TCP", 1)  # namespace matches, pod label does not
    assert not allowed(w, FRONTEND, DB, "TCP", 1)  # pod matches, namespace does not


def test_default_deny_allow_all_and_egress_inferred() -> None:
    deny = np("default", "deny", podSelector={}, policyTypes=["Ingress"])
    assert not allowed(world([deny]), FRONTEND, DB, "TCP", 80)
    assert allowed(world([deny]), DB, MON, "TCP", 80)  # egress not isolated
    allow_all = np("default", "all", podSelector={}, ingress=[{}])
    assert allowed(world([deny, allow_all]), MON, DB, "UDP", 53)  # rules are unions
    egress = np("default", "eg", podSelector={}, egress=[{"ports": [{"protocol": "UDP", "port": 53}]}])
    assert not allowed(world([egress]), DB, MON, "TCP", 80) and allowed(world([egress]), DB, MON, "UDP", 53)
    assert not allowed(world([egress]), MON, DB, "TCP", 80)  # no policyTypes + egress rules: Ingress too


def test_end_port_and_named_port() -> None:
    rng = np("default", "r", podSelector={"matchLabels": {"role": "db"}},
             ingress=[{"ports": [{"protocol": "TCP", "port": 32000, "endPort": 32768}]}])  # fmt: skip
    w = world([rng])
    assert allowed(w, MON, DB, "TCP", 32000) and allowed(w, MON, DB, "TCP", 32768)
    assert not allowed(w, MON, DB, "TCP", 32769)
    named = np(
        "default", "n", podSelector={"matchLabels": {"role": "db"}}, ingress=[{"ports": [{"port": "redis"}]}]
    )
    assert allowed(world([named]), MON, DB, "TCP", 6379) and not allowed(world([named]), MON, DB, "TCP", 6380)


# AdminNetworkPolicy / BaselineAdminNetworkPolicy (network-policy-api user stories)
ALL_NS: dict[str, Any] = {"namespaces": {}}


def ns_is(name: str) -> dict[str, Any]:
    return {"matchLabels": {"kubernetes.io/metadata.name": name}}


def test_anp_deny_overrides_a_tenant_allow() -> None:
    rule = {"name": "deny-all", "action": "Deny", "from": [{"namespaces": {}}]}
    sensitive = anp("sensitive-ns-deny", 10, {"namespaces": ns_is("sensitive")}, ingress=[rule])
    open_ = np("sensitive", "open", podSelector={}, ingress=[{}])
    assert not allowed(world([open_], [sensitive]), MON, SENSITIVE, "TCP", 8200)
    assert allowed(world([open_]), MON, SENSITIVE, "TCP", 8200)


def test_anp_allow_overrides_a_tenant_deny() -> None:
    rule = {"name": "mon", "action": "Allow", "from": [{"namespaces": ns_is("monitoring")}]}
    monitoring = anp("allow-monitoring", 9, ALL_NS, ingress=[rule])
    deny = np("default", "deny", podSelector={}, policyTypes=["Ingress"])
    assert allowed(world([deny], [monitoring]), MON, DB, "TCP", 9100)
    assert not allowed(world([deny], [monitoring]), FRONTEND, DB, "TCP", 9100)


def test_priority_then_rule_order() -> None:
    low = anp("low", 5, ALL_NS, ingress=[{"action": "Deny", "from": [{"namespaces": ns_is("monitoring")}]}])
    high = anp("high", 50, ALL_NS, ingress=[{"action": "Allow", "from": [{"namespaces": {}}]}])
    assert not allowed(world([], [high, low]), MON, DB, "TCP", 1)  # priority 5 first, whatever the order
    ordered = anp("o", 1, ALL_NS, ingress=[
        {"action": "Allow", "from": [{"namespaces": ns_is("monitoring")}],
         "ports": [{"portNumber": {"port": 9100}}]},
        {"action": "Deny", "from": [{"namespaces": {}}]},
    ])  # fmt: skip
    assert allowed(world([], [ordered]), MON, DB, "TCP", 9100)
    assert not allowed(world([], [ordered]), MON, DB, "TCP", 9101)
    assert not allowed(world([], [ordered]), MON, DB, "UDP", 9100)


def test_pass_delegates_to_networkpolicy_then_baseline() -> None:
    pass_ = anp(
        "pass", 1, ALL_NS, ingress=[{"action": "Pass", "from": [{"namespaces": ns_is("monitoring")}]}]
    )
    deny_later = anp("deny", 2, ALL_NS, ingress=[{"action": "Deny", "from": [{"namespaces": {}}]}])
    banp = {"metadata": {"name": "default"}, "spec": {"subject": ALL_NS, "ingress": [
        {"action": "Deny", "from": [{"namespaces": {}}]}]}}  # fmt: skip
    # passed: ANP "deny" (lower priority) is skipped; nothing isolates db: the baseline denies
    assert not allowed(world([], [pass_, deny_later], banp), MON, DB, "TCP", 1)
    assert allowed(world([], [pass_, deny_later]), MON, DB, "TCP", 1)
    # a NetworkPolicy isolating db decides, the baseline is not consulted
    tenant = np("default", "t", podSelector={"matchLabels": {"role": "db"}},
                ingress=[{"from": [{"namespaceSelector": ns_is("monitoring")}]}])  # fmt: skip
    assert allowed(world([tenant], [pass_, deny_later], banp), MON, DB, "TCP", 1)
    assert not allowed(world([tenant], [], banp), FRONTEND, DB, "TCP", 1)  # isolated, not allowed


def test_baseline_refined_by_tenants_and_egress_pods_peer() -> None:
    banp = {"metadata": {"name": "default"}, "spec": {"subject": {"pods": {
        "namespaceSelector": {}, "podSelector": {"matchLabels": {"role": "db"}}}},
        "egress": [{"action": "Deny", "to": [{"pods": {"namespaceSelector": ns_is("monitoring"),
                                                     "podSelector": {}}}]}]}}  # fmt: skip
    assert not allowed(world([], [], banp), DB, MON, "TCP", 80)
    assert allowed(world([], [], banp), FRONTEND, MON, "TCP", 80)  # not the subject
    tenant = np(
        "default", "e", podSelector={"matchLabels": {"role": "db"}}, policyTypes=["Egress"], egress=[{}]
    )
    assert allowed(world([tenant], [], banp), DB, MON, "TCP", 80)
