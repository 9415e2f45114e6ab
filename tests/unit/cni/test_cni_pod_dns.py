"""The DNS block of OVN IPAM results: the cluster search path per namespace, as kubelet's ClusterFirst."""

from __future__ import annotations

from cni.ipam import pod_dns
from cni.settings import AgentSettings
from cni.wire import Dns


def test_cluster_domain_gives_the_namespace_search_path_and_ndots() -> None:
    base = Dns(nameservers=("10.96.0.10",), search=("corp.example",))
    got = pod_dns(base, "cluster.local", "team-a")
    assert got.nameservers == ("10.96.0.10",)
    assert got.search == ("team-a.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example")
    assert got.options == ("ndots:5",)


def test_without_a_cluster_domain_the_configured_block_is_unchanged() -> None:
    base = Dns(nameservers=("192.0.2.53",), options=("ndots:2",))
    assert pod_dns(base, "", "team-a") is base


def test_agent_flag_and_env() -> None:
    s = AgentSettings.from_argv(
        [], {"PRISMNET_CLUSTER_DOMAIN": "cluster.local", "PRISMNET_DNS_SERVERS": "10.96.0.10"}
    )
    assert (s.cluster_domain, s.dns_servers) == ("cluster.local", "10.96.0.10")
