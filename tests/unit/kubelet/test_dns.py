"""A Pod's resolv.conf as kubelet writes it, for each dnsPolicy and with dnsConfig (pure)."""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet.dns import ResolvConf, pod_resolv_conf

NODE = ResolvConf.parse("# the node's\nnameserver 192.0.2.53\nsearch corp.example\noptions edns0 ndots:1\n")
DNS = ("10.96.0.10",)


def pod(ns: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": ns}, "spec": spec}


def test_cluster_first_is_kubelets_file() -> None:
    conf = pod_resolv_conf(pod(), DNS, "cluster.local", NODE)
    assert conf is not None
    assert conf.render() == (
        "search team-a.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
        "nameserver 10.96.0.10\n"
        "options ndots:5\n"
    )
    assert pod_resolv_conf(pod(dnsPolicy="ClusterFirst"), DNS, "cluster.local", NODE) == conf


def test_host_network_gets_the_nodes_unless_cluster_first_with_host_net() -> None:
    assert pod_resolv_conf(pod(hostNetwork=True), DNS, "cluster.local", NODE) is None
    assert pod_resolv_conf(pod(dnsPolicy="Default"), DNS, "cluster.local", NODE) is None
    conf = pod_resolv_conf(pod("kube-system", hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"),
                           DNS, "k3s.local", NODE)  # fmt: skip
    search = ("kube-system.svc.k3s.local", "svc.k3s.local", "k3s.local", "corp.example")
    assert conf == ResolvConf(DNS, search, ("ndots:5",))


def test_no_cluster_dns_falls_back_to_the_nodes() -> None:
    assert pod_resolv_conf(pod(), (), "cluster.local", NODE) is None


def test_dns_config_appends_and_merges_and_none_takes_only_it() -> None:
    cfg = {"nameservers": ["10.96.0.10", "1.1.1.1"], "searches": ["extra.example"],
           "options": [{"name": "ndots", "value": "2"}, {"name": "single-request-reopen"}]}  # fmt: skip
    conf = pod_resolv_conf(pod(dnsConfig=cfg), DNS, "cluster.local", NODE)
    assert conf is not None and conf.nameservers == ("10.96.0.10", "1.1.1.1")
    assert conf.searches[-2:] == ("corp.example", "extra.example")
    assert conf.options == ("ndots:2", "single-request-reopen")
    conf = pod_resolv_conf(pod(dnsPolicy="Default", dnsConfig=cfg), DNS, "cluster.local", NODE)
    assert conf is not None and conf.nameservers == ("192.0.2.53", "10.96.0.10", "1.1.1.1")
    assert conf.options == ("edns0", "ndots:2", "single-request-reopen")
    none = pod_resolv_conf(pod(dnsPolicy="None", dnsConfig={"nameservers": ["9.9.9.9"]}), DNS, "c.l", NODE)
    assert none == ResolvConf(("9.9.9.9",), (), ())


def test_limits_are_kubelets() -> None:
    cfg = {"nameservers": [f"10.0.0.{i}" for i in range(5)], "searches": [f"s{i}.example" for i in range(40)]}
    conf = pod_resolv_conf(pod(dnsPolicy="None", dnsConfig=cfg), DNS, "cluster.local", NODE)
    assert conf is not None and len(conf.nameservers) == 3 and len(conf.searches) == 32
