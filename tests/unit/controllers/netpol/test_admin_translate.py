"""AdminNetworkPolicy / BaselineAdminNetworkPolicy → OVN rows (pure): bands, Pass slots, peers, ports."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.netpol.admin_translate import (
    ANP_TOP,
    STRIDE,
    AdminCache,
    NodeInfo,
    admin_group,
    peers_set,
    translate_admin,
)
from controllers.netpol.adminpolicy import parse_admin
from controllers.netpol.policy import InvalidPolicy, parse_policy
from controllers.netpol.translate import Acl, Desired, Member, translate
from controllers.resources import ContainerPort

NAMESPACES = {"a": {"tenant": "x"}, "b": {"tenant": "y"}, "kube-system": {}}
MEMBERS = [
    Member(
        namespace="a",
        name="web",
        labels={"app": "web"},
        lsp="a-web",
        ips=("10.0.1.2",),
        ports=(ContainerPort(name="http", container_port=8080),),
    ),
    Member(namespace="a", name="fe", labels={"app": "fe"}, lsp="a-fe", ips=("10.0.1.3",)),
    Member(namespace="b", name="fe", labels={"app": "fe"}, lsp="b-fe", ips=("10.0.2.3",)),
    Member(
        namespace="kube-system",
        name="dns",
        labels={"k8s-app": "dns"},
        lsp="dns",
        ips=("10.0.3.2",),
        ports=(ContainerPort(name="dns", container_port=53, protocol="UDP"),),
    ),
]
NODES = [NodeInfo("node1", {"role": "worker"}, ("192.168.50.1",)), NodeInfo("node2", {}, ("192.168.50.2",))]


def anp(name: str, priority: int, **spec: Any) -> Any:
    spec.setdefault("subject", {"namespaces": {"matchLabels": {"tenant": "x"}}})
    return parse_admin({"metadata": {"name": name}, "spec": {"priority": priority, **spec}}, baseline=False)


def banp(**spec: Any) -> Any:
    spec.setdefault("subject", {"namespaces": {}})
    return parse_admin({"metadata": {"name": "default"}, "spec": spec}, baseline=True)


def run(*admin: Any, policies: tuple[Any, ...] = ()) -> tuple[Desired, dict[str, Any]]:
    desired, _ = translate(policies, MEMBERS, NAMESPACES, ["10.0.0.2"])
    return desired, translate_admin(desired, admin, MEMBERS, NAMESPACES, NODES)


def acls(d: Desired, key: str) -> list[Acl]:
    return sorted(d.port_groups[admin_group(key)].acls, key=lambda a: (a.direction, -a.priority))


ALL_NS: list[dict[str, Any]] = [{"namespaces": {}}]


def test_anp_rules_sit_above_networkpolicy_in_precedence_order() -> None:
    first = anp("first", 1, ingress=[{"action": "Deny", "from": ALL_NS}, {"action": "Allow", "from": ALL_NS}])
    second = anp("second", 5, ingress=[{"action": "Allow", "from": ALL_NS}])
    d, out = run(second, first)
    one, five = ANP_TOP - STRIDE, ANP_TOP - 5 * STRIDE  # each ANP priority's own band
    assert [a.priority for a in acls(d, "anp:first")] == [one, one - 1]
    assert [a.action for a in acls(d, "anp:first")] == ["drop", "allow-related"]
    assert [a.priority for a in acls(d, "anp:second")] == [five]
    alone, _ = run(second)
    assert acls(alone, "anp:second") == acls(d, "anp:second")  # the others do not move it
    assert d.port_groups[admin_group("anp:first")].ports == {"a-web", "a-fe"}
    assert out["anp:first"].ready and out["anp:second"].ready


def test_banp_is_below_networkpolicy() -> None:
    d, out = run(
        banp(ingress=[{"action": "Deny", "from": ALL_NS}], egress=[{"action": "Allow", "to": ALL_NS}])
    )
    got = acls(d, "banp:default")
    assert {(a.direction, a.priority, a.action) for a in got} == {
        ("to-lport", 999, "drop"),
        ("from-lport", 999, "allow-related"),
    }
    assert all(a.after_lb == (a.direction == "from-lport") for a in got)
    assert out["banp:default"].ready


def test_pass_slot_copies_networkpolicy_then_banp_then_allow() -> None:
    policy = parse_policy(
        {
            "metadata": {"namespace": "a", "name": "p"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "fe"}}}]}],
            },
        }
    )
    base = banp(ingress=[{"action": "Deny", "from": ALL_NS}])
    passing = anp(
        "pass", 1, ingress=[{"action": "Pass", "from": [{"namespaces": {"matchLabels": {"tenant": "x"}}}]}]
    )
    below = anp("below", 2, ingress=[{"action": "Deny", "from": ALL_NS}])
    d, _ = run(passing, below, base, policies=(policy,))
    slot = acls(d, "anp:pass")
    top = ANP_TOP - STRIDE  # priority 1's band; a slot of 3 + 1: NP allow, NP deny, one BANP rule, allow
    assert [(a.priority, a.action) for a in slot] == [
        (top, "allow-related"),
        (top, "allow-related"),  # the NP's rule, the nodes' probes
        (top - 1, "drop"),  # the NP's default deny
        (top - 2, "drop"),  # the BANP rule
        (top - 3, "allow-related"),  # nothing below decided: allow
    ]
    t = slot[-1].match
    assert all(a.match.startswith(f"({t}) && (") for a in slot[:-1])
    assert [a.priority for a in acls(d, "anp:below")] == [ANP_TOP - 2 * STRIDE]


DNS = {"matchLabels": {"k8s-app": "dns"}}


def test_peers_and_ports_go_into_address_sets() -> None:
    p = anp(
        "peers",
        3,
        subject={"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "fe"}}}},
        egress=[
            {
                "action": "Allow",
                "to": [
                    {"nodes": {"matchLabels": {"role": "worker"}}},
                    {"networks": ["203.0.113.0/24", "2001:db8::/64"]},
                    {"pods": {"namespaceSelector": {}, "podSelector": DNS}},
                ],
                "ports": [
                    {"portRange": {"protocol": "UDP", "start": 5000, "end": 5010}},
                    {"portNumber": {"protocol": "SCTP", "port": 9}},
                    {"namedPort": "dns"},
                ],
            }
        ],
    )
    d, out = run(p)
    (acl,) = acls(d, "anp:peers")
    tag, shared = f"{admin_group('anp:peers')}_eg0", peers_set(p.egress[0].peers)
    assert d.address_sets[f"{shared}_v4"].addresses == {"192.168.50.1", "203.0.113.0/24", "10.0.3.2"}
    assert d.address_sets[f"{shared}_v6"].addresses == {"2001:db8::/64"}
    assert d.address_sets[f"{tag}_p2_udp53"].addresses == {"10.0.3.2"}
    peers = f"(ip4.dst == ${shared}_v4 || ip6.dst == ${shared}_v6)"
    named = f"(ip4.dst == ${tag}_p2_udp53 && udp.dst == 53)"
    ports = f"((udp.dst >= 5000 && udp.dst <= 5010) || sctp.dst == 9 || {named})"
    assert acl.match == f"inport == @{admin_group('anp:peers')} && {peers} && {ports}"
    assert d.port_groups[admin_group("anp:peers")].ports == {"a-fe", "b-fe"}
    assert out["anp:peers"].ready


def test_named_port_of_the_subject_on_ingress() -> None:
    d, _ = run(anp("np", 1, ingress=[{"action": "Allow", "from": ALL_NS, "ports": [{"namedPort": "http"}]}]))
    (acl,) = acls(d, "anp:np")
    assert acl.match.endswith("_in0_p0_tcp8080 && tcp.dst == 8080)")
    assert d.address_sets[f"{admin_group('anp:np')}_in0_p0_tcp8080"].addresses == {"10.0.1.2"}


def test_unresolved_named_port_matches_nothing() -> None:
    d, _ = run(anp("np", 1, ingress=[{"action": "Deny", "from": ALL_NS, "ports": [{"namedPort": "nope"}]}]))
    assert acls(d, "anp:np") == []


def test_priority_above_99_and_domain_names_are_reported() -> None:
    high = anp("high", 100, ingress=[{"action": "Deny", "from": ALL_NS}])
    dns = anp("dns", 4, egress=[{"action": "Allow", "to": [{"domainNames": ["example.com"]}]}])
    d, out = run(high, dns)
    assert not out["anp:high"].ready and "above 99" in out["anp:high"].message
    assert admin_group("anp:high") not in d.port_groups
    assert not out["anp:dns"].ready and "domainNames" in out["anp:dns"].message
    (_acl,) = acls(d, "anp:dns")  # fail closed for Allow: an empty set, matches nothing
    assert d.address_sets[f"{peers_set(dns.egress[0].peers)}_v4"].addresses == frozenset()


def test_a_peer_field_this_api_has_not_fails_closed() -> None:
    unknown = [{"networks": ["10.0.0.0/8"]}]  # an ingress `networks` peer: not in v1alpha1
    allow = anp("allow", 2, ingress=[{"action": "Allow", "from": unknown}])
    d, out = run(anp("deny", 1, ingress=[{"action": "Deny", "from": unknown}]), allow)
    assert [a.match for a in acls(d, "anp:deny")] == [f"outport == @{admin_group('anp:deny')} && ip"]
    assert d.address_sets[f"{peers_set(allow.ingress[0].peers)}_v4"].addresses == frozenset()
    assert not out["anp:deny"].ready and "spec.ingress[0].from[0].networks" in out["anp:deny"].message


def test_same_priority_shares_the_band_and_is_said() -> None:
    d, out = run(
        anp("b", 7, ingress=[{"action": "Deny", "from": ALL_NS}]),
        anp("a", 7, ingress=[{"action": "Allow", "from": ALL_NS}]),
    )
    assert acls(d, "anp:a")[0].priority == acls(d, "anp:b")[0].priority == ANP_TOP - 7 * STRIDE
    assert "shares priority 7 with b" in out["anp:a"].message


EVERY: dict[str, Any] = {"namespaces": {}}
BAD_RANGE = {"portRange": {"start": 9, "end": 9}}


@pytest.mark.parametrize(
    "spec",
    [
        {"priority": 1, "subject": {}},
        {"priority": 1, "subject": EVERY, "ingress": [{"action": "Drop", "from": ALL_NS}]},
        {"priority": 1, "subject": EVERY, "egress": [{"action": "Deny", "to": [{"networks": ["10.0.0.1"]}]}]},
        {"priority": 1, "subject": EVERY, "egress": [{"action": "Deny", "to": ALL_NS, "ports": [BAD_RANGE]}]},
    ],
)
def test_invalid_policies_raise(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidPolicy):
        parse_admin({"metadata": {"name": "x"}, "spec": spec}, baseline=False)


def test_banp_pass_and_other_names_are_refused() -> None:
    with pytest.raises(InvalidPolicy):
        parse_admin(
            {
                "metadata": {"name": "default"},
                "spec": {"subject": {"namespaces": {}}, "ingress": [{"action": "Pass", "from": ALL_NS}]},
            },
            baseline=True,
        )
    with pytest.raises(InvalidPolicy):
        parse_admin({"metadata": {"name": "other"}, "spec": {"subject": {"namespaces": {}}}}, baseline=True)


def test_an_unchanged_anp_is_not_translated_again() -> None:
    cache, p = AdminCache(), anp("c", 3, ingress=[{"action": "Deny", "from": ALL_NS}])
    first, _ = translate((), MEMBERS, NAMESPACES, [])
    translate_admin(first, [p], MEMBERS, NAMESPACES, NODES, cache=cache)
    again, _ = translate((), MEMBERS, NAMESPACES, [])
    translate_admin(
        again,
        [p, anp("d", 4, ingress=[{"action": "Allow", "from": ALL_NS}])],
        MEMBERS,
        NAMESPACES,
        NODES,
        cache=cache,
    )
    group = admin_group("anp:c")
    assert again.port_groups[group] is first.port_groups[group]  # the cached object itself
    moved = [*MEMBERS[:-1]]  # a pod gone: everything is translated anew
    third, _ = translate((), moved, NAMESPACES, [])
    translate_admin(third, [p], moved, NAMESPACES, NODES, cache=cache)
    assert third.port_groups[group] is not first.port_groups[group]
