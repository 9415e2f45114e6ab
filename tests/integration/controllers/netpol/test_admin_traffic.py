"""AdminNetworkPolicies / the BANP translated and applied to the real OVN, checked with real TCP/UDP
between pod netns (one node; across nodes: tests/integration/cluster/test_admin_policy_across_nodes.py).
The BANP band on its own (below NetworkPolicy, above the default allow) and Pass handing traffic to it."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.netpol.admin_translate import translate_admin
from controllers.netpol.adminpolicy import parse_admin
from controllers.netpol.policy import NetworkPolicy, parse_policy
from controllers.netpol.translate import translate
from tests.integration.controllers.netpol.conftest import Cluster
from tests.integration.controllers.netpol.sctp_raw import sctp_reaches
from tests.integration.controllers.netpol.test_netpol_traffic import A_FE, A_WEB, B_DB, B_FE, check

pytestmark = [pytest.mark.root, pytest.mark.ovn]
TEAM_B = {"namespaces": {"matchLabels": {"team": "b"}}}


def apply(c: Cluster, *admin: Any, policies: tuple[NetworkPolicy, ...] = ()) -> None:
    desired, _ = translate(policies, c.members(), c.namespaces, c.node_ips())
    outcomes = translate_admin(desired, list(admin), c.members(), c.namespaces, [])
    assert all(o.ready for o in outcomes.values()), outcomes
    c.nb.apply(desired)
    c.sync()


def banp(**spec: Any) -> Any:
    return parse_admin(
        {"metadata": {"name": "default"}, "spec": {"subject": {"namespaces": {}}, **spec}}, baseline=True
    )


def anp(name: str, priority: int, **spec: Any) -> Any:
    spec.setdefault("subject", {"namespaces": {}})
    return parse_admin({"metadata": {"name": name}, "spec": {"priority": priority, **spec}}, baseline=False)


def test_banp_decides_only_where_no_networkpolicy_does(cluster: Cluster) -> None:
    closed = banp(
        ingress=[
            {
                "action": "Allow",
                "from": [{"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "db"}}}}],
            },
            {"action": "Deny", "from": [{"namespaces": {}}]},
        ],
        egress=[
            {
                "action": "Deny",
                "to": [{"networks": ["0.0.0.0/0"]}],
                "ports": [{"portNumber": {"protocol": "UDP", "port": 5353}}],
            }
        ],
    )
    apply(cluster, closed)
    check(
        cluster,
        [
            (A_FE, A_WEB, "tcp", 8080, False),
            (B_DB, A_WEB, "tcp", 8080, True),  # BANP rule order
            (A_FE, B_DB, "udp", 5353, False),
            (None, A_WEB, "tcp", 8080, True),
        ],
    )  # egress; node: no ns
    web_in = parse_policy(
        {
            "metadata": {"namespace": "np-a", "name": "web-in"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "fe"}}}]}],
            },
        }
    )
    apply(cluster, closed, policies=(web_in,))
    check(cluster, [(A_FE, A_WEB, "tcp", 8080, True), (B_DB, A_WEB, "tcp", 8080, False)])  # NP above BANP


def test_pass_skips_lower_anps_and_reaches_the_banp(cluster: Cluster) -> None:
    deny = anp("deny-b", 20, ingress=[{"action": "Deny", "from": [TEAM_B]}])
    passing = anp(
        "pass-b-udp",
        10,
        ingress=[
            {
                "action": "Pass",
                "from": [TEAM_B],
                "ports": [{"portRange": {"protocol": "UDP", "start": 5000, "end": 6000}}],
            }
        ],
    )
    allow_fe = banp(
        ingress=[
            {
                "action": "Allow",
                "from": [{"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "fe"}}}}],
            },
            {"action": "Deny", "from": [TEAM_B]},
        ]
    )
    apply(cluster, deny, passing, allow_fe)
    check(
        cluster,
        [
            (B_FE, A_WEB, "udp", 5353, True),
            (B_DB, A_WEB, "udp", 5353, False),  # passed to the BANP
            (B_FE, A_WEB, "tcp", 8080, False),
            (A_FE, A_WEB, "tcp", 8080, True),
        ],
    )  # not passed: ANP deny


def test_sctp_ports_by_raw_init_packets(cluster: Cluster) -> None:
    """protocol SCTP (portNumber, portRange; ingress and egress) by traffic: raw SCTP INITs (sctp_raw.py;
    the kernel has no SCTP stack) carried, or not, through OVS's `sctp.dst` ACL matches and conntrack."""

    def sctp(src: str, dst: str, port: int) -> bool:
        p, q = cluster.pods[src], cluster.pods[dst]
        return any(sctp_reaches(p.netns, q.netns, q.ip, port) for _ in range(2))  # one loss on a busy machine

    apply(cluster)
    assert sctp(B_FE, A_WEB, 9999) and sctp(A_FE, A_WEB, 7050), "SCTP not carried without a policy"
    sctp_in = [{"portNumber": {"protocol": "SCTP", "port": 9999}},
               {"portRange": {"protocol": "SCTP", "start": 7000, "end": 7100}}]  # fmt: skip
    deny_in = anp("sctp-in", 20, subject={"namespaces": {"matchLabels": {"team": "a"}}},
                  ingress=[{"action": "Deny", "from": [TEAM_B], "ports": sctp_in}])  # fmt: skip
    deny_out = anp("sctp-out", 30, subject={"namespaces": {"matchLabels": {"team": "a"}}},
                   egress=[{"action": "Deny", "to": [TEAM_B],
                            "ports": [{"portNumber": {"protocol": "SCTP", "port": 8888}}]}])  # fmt: skip
    apply(cluster, deny_in, deny_out)
    got = {
        "b->a 9999 (denied)": sctp(B_FE, A_WEB, 9999),
        "b->a 7050 (denied, range)": sctp(B_FE, A_WEB, 7050),
        "b->a 9998 (allowed)": sctp(B_FE, A_WEB, 9998),
        "a->a 9999 (allowed)": sctp(A_FE, A_WEB, 9999),
        "a->b 8888 (denied, egress)": sctp(A_FE, B_DB, 8888),
        "a->b 8887 (allowed)": sctp(A_FE, B_DB, 8887),
    }
    want = {k: k.endswith("(allowed)") for k in got}
    apply(cluster)
    assert got == want
