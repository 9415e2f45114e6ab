"""Translation of policies into port groups, address sets and ACLs (table-driven, pure)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.netpol.policy import parse_policy
from controllers.netpol.translate import (
    NODES_SET,
    Acl,
    Desired,
    Frozen,
    Member,
    deny_group,
    policy_group,
    translate,
)
from controllers.resources import ContainerPort

NAMESPACES = {"a": {"team": "red"}, "b": {"team": "blue"}, "kube-system": {}}
MEMBERS = [
    Member(namespace="a", name="web", labels={"app": "web"}, lsp="web-1", ips=("10.0.1.2",),
           ports=(ContainerPort(name="http", container_port=8080),)),
    Member(namespace="a", name="web2", labels={"app": "web"}, lsp="web2-1", ips=("10.0.1.5",),
           ports=(ContainerPort(name="http", container_port=9090),)),
    Member(namespace="a", name="fe", labels={"app": "fe"}, lsp="fe-1", ips=("10.0.1.3",)),
    Member(namespace="b", name="fe", labels={"app": "fe"}, lsp="bfe-1", ips=("10.0.2.3",)),
    Member(namespace="b", name="db", labels={"app": "db"}, lsp="bdb-1", ips=("10.0.2.4",),
           ports=(ContainerPort(name="sql", container_port=5432),)),
    Member(namespace="kube-system", name="dns", labels={"k8s-app": "dns"}, lsp="dns-1", ips=("10.0.3.2",),
           ports=(ContainerPort(name="dns", container_port=53, protocol="UDP"),)),
]  # fmt: skip


def np(name: str = "p", ns: str = "a", **spec: Any) -> Any:
    return parse_policy({"metadata": {"namespace": ns, "name": name}, "spec": {"podSelector": {}, **spec}})


def run(*policies: Any, **kw: Any) -> tuple[Desired, dict[str, str]]:
    return translate(policies, MEMBERS, NAMESPACES, ["10.0.0.2"], **kw)


def sets_named(d: Desired) -> dict[str, set[str]]:
    return {s.name: set(s.addresses) for s in d.address_sets.values()}


WEB = {"matchLabels": {"app": "web"}}
FE = {"podSelector": {"matchLabels": {"app": "fe"}}}
PG = policy_group("a/p")
IN0 = f"{PG}_in0"
EG0 = f"{PG}_eg0"

CASES = [
    # (id, spec, expected ACL matches after the port side, expected address sets)
    ("ingress podSelector tcp 80", {"podSelector": WEB, "ingress": [{"from": [FE], "ports": [{"port": 80}]}]},
     {f"ip4.src == ${IN0} && tcp.dst == 80"}, {IN0: {"10.0.1.3"}}),
    ("ingress from anywhere", {"ingress": [{}]}, {"ip4"}, {}),
    ("ingress deny all", {"policyTypes": ["Ingress"]}, set(), {}),
    ("namespaceSelector", {"ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}]},
     {f"ip4.src == ${IN0}"}, {IN0: {"10.0.2.3", "10.0.2.4"}}),
    ("namespace and pod selector", {"ingress": [{"from": [{"namespaceSelector": {}, **FE}]}]},
     {f"ip4.src == ${IN0}"}, {IN0: {"10.0.1.3", "10.0.2.3"}}),
    ("ipBlock with except", {"ingress": [{"from": [{"ipBlock": {"cidr": "192.168.0.0/16",
                                                                   "except": ["192.168.1.0/24"]}}]}]},
     {"(ip4.src == 192.168.0.0/16 && ip4.src != {192.168.1.0/24})"}, {}),
    ("ipv6 ipBlock", {"ingress": [{"from": [{"ipBlock": {"cidr": "fd00::/64", "except": ["fd00::/80"]}}]}]},
     {"(ip6.src == fd00::/64 && ip6.src != {fd00::/80})"}, {}),
    ("peers or'ed", {"ingress": [{"from": [FE, {"ipBlock": {"cidr": "172.16.0.0/12"}}]}]},
     {f"(ip4.src == ${IN0} || ip4.src == 172.16.0.0/12)"}, {IN0: {"10.0.1.3"}}),
    ("udp range sctp", {"ingress": [{"ports": [{"protocol": "UDP", "port": 5000, "endPort": 5010},
                                              {"protocol": "SCTP", "port": 9}, {"protocol": "TCP"}]}]},
     {"ip4 && ((udp.dst >= 5000 && udp.dst <= 5010) || sctp.dst == 9 || tcp)"}, {}),
    ("named port: one name, two numbers", {"podSelector": WEB, "ingress": [{"ports": [{"port": "http"}]}]},
     {f"ip4 && ((ip4.dst == ${IN0}_p0_8080 && tcp.dst == 8080) || "
      f"(ip4.dst == ${IN0}_p0_9090 && tcp.dst == 9090))"},
     {f"{IN0}_p0_8080": {"10.0.1.2"}, f"{IN0}_p0_9090": {"10.0.1.5"}}),
    ("egress to kube-system dns", {"policyTypes": ["Egress"], "egress": [
        {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
         "ports": [{"protocol": "UDP", "port": 53}]}]},
     {f"ip4.dst == ${EG0} && udp.dst == 53"}, {EG0: {"10.0.3.2"}}),
    ("egress named port on peers", {"policyTypes": ["Egress"], "egress": [
        {"to": [{"namespaceSelector": {}}], "ports": [{"port": "sql"}]}]},
     {f"ip4.dst == ${EG0} && (ip4.dst == ${EG0}_p0_5432 && tcp.dst == 5432)"},
     {EG0: {m.ips[0] for m in MEMBERS}, f"{EG0}_p0_5432": {"10.0.2.4"}}),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "matches", "sets"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_shapes(spec: dict[str, Any], matches: set[str], sets: dict[str, set[str]]) -> None:
    desired, skipped = run(np(**spec))
    assert skipped == {}
    pg = desired.port_groups[PG]
    side = {"Ingress": f"outport == @{PG} && ", "Egress": f"inport == @{PG} && "}
    got = {a.match.removeprefix(side["Ingress"]).removeprefix(side["Egress"]) for a in pg.acls}
    assert got == matches
    assert all(a.action == "allow-related" and a.priority == 1001 for a in pg.acls)
    assert {k: v for k, v in sets_named(desired).items() if k.startswith(PG)} == sets


def test_selected_pods_and_default_deny_per_namespace_and_direction() -> None:
    desired, _ = run(
        np("p", podSelector=WEB, ingress=[{}]),
        np("q", podSelector={"matchLabels": {"app": "fe"}}, policyTypes=["Ingress", "Egress"]),
    )
    assert desired.port_groups[PG].ports == {"web-1", "web2-1"}
    deny_in, deny_eg = (
        desired.port_groups[deny_group("a", "Ingress")],
        desired.port_groups[deny_group("a", "Egress")],
    )
    assert deny_in.ports == {"web-1", "web2-1", "fe-1"} and deny_eg.ports == {"fe-1"}
    assert deny_group("b", "Ingress") not in desired.port_groups  # pods no policy selects: unaffected
    name = deny_group("a", "Ingress")
    assert deny_in.acls == {
        Acl("to-lport", 1000, f"outport == @{name} && ip", "drop"),
        Acl("to-lport", 1001, f"outport == @{name} && ip4.src == ${NODES_SET}", "allow-related"),
    }
    (drop,) = deny_eg.acls
    assert (drop.direction, drop.action, drop.after_lb) == ("from-lport", "drop", True)
    assert desired.address_sets[NODES_SET].addresses == {"10.0.0.2"}


def test_egress_acls_apply_after_the_load_balancer() -> None:
    desired, _ = run(np(policyTypes=["Egress"], egress=[{"to": [FE]}]))
    (acl,) = desired.port_groups[PG].acls
    assert (acl.direction, acl.after_lb) == ("from-lport", True)


def test_named_port_no_pod_declares_skips_the_policy() -> None:
    desired, skipped = run(np(ingress=[{"ports": [{"port": "nosuch"}]}]))
    assert "nosuch" in skipped["a/p"] and PG not in desired.port_groups
    assert deny_group("a", "Ingress") not in desired.port_groups


def test_skipped_policy_keeps_its_previous_isolation() -> None:
    previous = {"a/p": Frozen("a/p", "a", frozenset({"Ingress"}), frozenset({"web-1"}))}
    desired, skipped = run(invalid={"a/p": "bad CIDR"}, previous=previous)
    assert skipped == {"a/p": "bad CIDR"}
    assert desired.port_groups[deny_group("a", "Ingress")].ports == {"web-1"}


def test_acl_count_is_linear_in_rules_not_pods() -> None:
    many = [
        Member(
            namespace="a",
            name=f"p{i}",
            labels={"app": "web"},
            lsp=f"l{i}",
            ips=(f"10.1.{i // 250}.{i % 250}",),
        )
        for i in range(500)
    ]
    policies = [
        np(f"p{i}", podSelector=WEB, ingress=[{"from": [FE], "ports": [{"port": 80}]}]) for i in range(100)
    ]
    few, _ = translate(policies[:10], many[:5], NAMESPACES, [])
    lots, _ = translate(policies, many, NAMESPACES, [])
    assert few.acl_count() == 10 + 2 and lots.acl_count() == 100 + 2
    assert len(lots.port_groups) == 101 and len(lots.port_groups[policy_group("a/p7")].ports) == 500


def test_memo_translates_only_the_changed_policy_and_gives_the_same_state() -> None:
    from controllers.netpol.translate import TranslateMemo

    memo = TranslateMemo()
    web = np("web", podSelector=WEB, ingress=[{"from": [FE]}])
    fe = np("fe", podSelector={"matchLabels": {"app": "fe"}}, ingress=[{"ports": [{"port": "http"}]}])
    run(web, fe, memo=memo)
    assert memo.hits == 0
    other = np("other", ns="b", ingress=[{"from": [{"namespaceSelector": {}}]}])
    got = run(web, fe, other, memo=memo)
    assert memo.hits == 2  # web and fe reused, other translated
    assert got == run(web, fe, other)
    assert run(web, other, memo=memo) == run(web, other)  # a policy deleted: its result goes
    assert set(memo.assembly.had) == {"a/web", "b/other"}
    changed = np("web", podSelector=WEB, ingress=[{"from": [{"podSelector": {}}]}])  # same key, new spec
    assert run(changed, other, memo=memo) == run(changed, other)


def test_memo_is_forgotten_when_a_pod_or_a_namespace_changes() -> None:
    from controllers.netpol.translate import TranslateMemo

    memo = TranslateMemo()
    web = np(
        "web",
        podSelector=WEB,
        ingress=[{"from": [FE, {"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}],
    )
    run(web, memo=memo)
    relabelled = [
        Member(namespace=m.namespace, name=m.name, labels={"app": "web"}, lsp=m.lsp, ips=m.ips, ports=m.ports)
        if m.lsp == "fe-1" else m
        for m in MEMBERS
    ]  # fmt: skip
    got = translate([web], relabelled, NAMESPACES, ["10.0.0.2"], memo=memo)
    assert got == translate([web], relabelled, NAMESPACES, ["10.0.0.2"])
    assert "fe-1" in got[0].port_groups[policy_group("a/web")].ports
    spaces = {**NAMESPACES, "b": {"team": "green"}}
    got = translate([web], relabelled, spaces, ["10.0.0.2"], memo=memo)
    assert got == translate([web], relabelled, spaces, ["10.0.0.2"])
    assert "10.0.2.3" not in sets_named(got[0])[f"{policy_group('a/web')}_in0"]
    assert memo.hits == 0


def test_memo_keeps_a_skipped_policy_skipped() -> None:
    from controllers.netpol.translate import TranslateMemo

    memo = TranslateMemo()
    bad = np("bad", ingress=[{"ports": [{"port": "nope"}]}])
    first, second = run(bad, memo=memo), run(bad, memo=memo)
    assert memo.hits == 1 and first[1] == second[1] and "nope" in second[1]["a/bad"]


def test_memo_patched_through_random_changes_gives_what_a_fresh_translation_gives() -> None:
    """Policies created, changed (spec, kind of rule, a named port no pod declares) and deleted,
    namespace logging switched, the world changed now and then: after every step the memoized
    translation (patched policy by policy) equals one made from nothing."""
    import random

    from controllers.netpol.acl_logging import OFF, LogSetting
    from controllers.netpol.translate import TranslateMemo

    rng = random.Random(33)
    specs = [
        {"podSelector": WEB, "ingress": [{"from": [FE], "ports": [{"port": 80}]}]},
        {"policyTypes": ["Ingress", "Egress"], "egress": [{"to": [{"namespaceSelector": {}}]}]},
        {"ingress": [{"ports": [{"port": "http"}]}]},
        {"ingress": [{"ports": [{"port": "nope"}]}]},  # skipped: no pod names it
        {"podSelector": {"matchLabels": {"app": "fe"}}, "policyTypes": ["Egress"]},
        {"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.2.0/24"]}}]}]},
    ]
    memo, policies, logging = TranslateMemo(), {}, {}
    members, spaces = MEMBERS, NAMESPACES
    for step in range(300):
        roll = rng.random()
        key = (rng.choice(["a", "b", "kube-system"]), f"p{rng.randrange(6)}")
        if roll < 0.45:
            policies[key] = np(key[1], ns=key[0], **rng.choice(specs))
        elif roll < 0.75:
            policies.pop(key, None)
        elif roll < 0.9:
            on = LogSetting(allow="info", deny="alert") if rng.random() < 0.5 else OFF
            logging[key[0]] = on
        elif roll < 0.95:
            members = rng.sample(MEMBERS, k=rng.randrange(2, len(MEMBERS) + 1))
        else:
            spaces = {**NAMESPACES, "b": {"team": rng.choice(["blue", "green"])}}
        listed = list(policies.values())
        rng.shuffle(listed)
        kw: dict[str, Any] = {"logging": dict(logging)}
        got = translate(listed, members, spaces, ["10.0.0.2"], memo=memo, **kw)
        assert got == translate(listed, members, spaces, ["10.0.0.2"], **kw), f"step {step}"
    assert memo.hits > 300  # most policies were reused, not translated again
