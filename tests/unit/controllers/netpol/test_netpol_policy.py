"""NetworkPolicy parsing: the API's defaults, and every bad value refused as a whole."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from controllers.netpol.policy import InvalidPolicy, IpBlock, PortSpec, Selector, parse_policy


def policy(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns1", "name": "p"}, "spec": {"podSelector": {}, **spec}}


@pytest.mark.parametrize(
    ("spec", "types"),
    [
        ({}, {"Ingress"}),
        ({"egress": [{}]}, {"Ingress", "Egress"}),
        ({"egress": []}, {"Ingress"}),
        ({"policyTypes": ["Egress"]}, {"Egress"}),
        ({"policyTypes": ["Ingress", "Egress"], "ingress": [{}]}, {"Ingress", "Egress"}),
    ],
)
def test_policy_types_default_like_the_api(spec: dict[str, Any], types: set[str]) -> None:
    assert parse_policy(policy(**spec)).types == types


def test_rules_peers_and_ports_are_typed() -> None:
    p = parse_policy(
        policy(
            ingress=[
                {
                    "from": [
                        {"podSelector": {"matchLabels": {"app": "fe"}}},
                        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"x": "y"}}},
                        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                    ],
                    "ports": [
                        {"port": 80},
                        {"protocol": "UDP", "port": "dns"},
                        {"protocol": "SCTP", "port": 100, "endPort": 200},
                        {"protocol": "TCP"},
                    ],
                }
            ]
        )
    )
    (rule,) = p.ingress
    assert rule.peers[0].pod_selector == Selector((("app", "fe"),))
    assert rule.peers[1].namespace_selector == Selector() and rule.peers[1].pod_selector is not None
    assert rule.peers[2].ip_block == IpBlock(
        ipaddress.ip_network("10.0.0.0/8"), (ipaddress.ip_network("10.1.0.0/16"),)
    )
    assert rule.ports == (
        PortSpec("TCP", 80),
        PortSpec("UDP", "dns"),
        PortSpec("SCTP", 100, 200),
        PortSpec("TCP", None),
    )


@pytest.mark.parametrize(
    ("labels", "selector", "expected"),
    [
        ({"a": "1"}, {}, True),
        ({"a": "1"}, {"matchLabels": {"a": "1"}}, True),
        ({"a": "2"}, {"matchLabels": {"a": "1"}}, False),
        ({"a": "1"}, {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, True),
        ({"a": "3"}, {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, True),
        ({}, {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, True),
        ({}, {"matchExpressions": [{"key": "a", "operator": "Exists"}]}, False),
        ({}, {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, True),
    ],
)
def test_label_selectors(labels: dict[str, str], selector: dict[str, Any], expected: bool) -> None:
    assert Selector.parse(selector, "s").matches(labels) is expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.300/8"}}]}]}, "not a CIDR"),
        ({"ingress": [{"from": [{"ipBlock": {"cidr": 7}}]}]}, "CIDR"),
        ({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]}]}, "subnet"),
        ({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]}, "combined"),
        ({"ingress": [{"from": [{}]}]}, "needs podSelector"),
        ({"ingress": [{"ports": [{"protocol": "ICMP"}]}]}, "protocol"),
        ({"ingress": [{"ports": [{"port": 0}]}]}, "1-65535"),
        ({"ingress": [{"ports": [{"port": "Not_A_Name"}]}]}, "port name"),
        ({"ingress": [{"ports": [{"port": "http", "endPort": 90}]}]}, "numeric"),
        ({"ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}, "endPort"),
        ({"policyTypes": ["Sideways"]}, "policyTypes"),
        ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "operator"),
        ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "values"),
        ({"ingress": {"from": []}}, "list"),
    ],
)
def test_invalid_policies_are_refused_whole(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPolicy, match=message):
        parse_policy(policy(**spec))
