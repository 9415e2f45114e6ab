"""The k3s host files (daemonsets/k3s/): only flags k3s has, the spec's values, and the same CIDRs,
DNS address, domain and webhook/audit paths as the manifests the cluster runs."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
import yaml

from tests.unit.daemonsets import programs
from tests.unit.daemonsets.rendered import K3S, container_env, find, k3s_file, objects

Obj = dict[str, Any]
# Flag names from k3s's pkg/cli/cmds/server.go and agent.go (the ones a config here may use).
SERVER_FLAGS = {
    "data-dir", "disable", "flannel-backend", "disable-network-policy", "disable-kube-proxy",
    "cluster-domain", "cluster-cidr", "service-cidr", "cluster-dns", "service-node-port-range",
    "bind-address", "advertise-address", "https-listen-port", "tls-san", "write-kubeconfig-mode",
    "kube-apiserver-arg", "kube-controller-manager-arg", "kube-scheduler-arg", "etcd-arg",
    "cluster-init", "server", "token", "token-file", "agent-token-file", "datastore-endpoint",
    "etcd-snapshot-schedule-cron", "etcd-snapshot-retention", "secrets-encryption", "node-ip",
    "node-label", "node-taint", "kubelet-arg", "kube-proxy-arg", "protect-kernel-defaults",
}  # fmt: skip
AGENT_FLAGS = {"server", "token", "token-file", "data-dir", "node-ip", "node-name", "node-label",
               "node-taint", "kubelet-arg", "kube-proxy-arg", "protect-kernel-defaults",
               "with-node-id"}  # fmt: skip
DISABLE_ITEMS = {"coredns", "servicelb", "traefik", "local-storage", "metrics-server", "runtimes"}
AUDIT_LEVELS = ("None", "Metadata", "Request", "RequestResponse")


def server(variant: str | None = None) -> Obj:
    """/etc/rancher/k3s/config.yaml plus a config.yaml.d drop-in, merged as k3s does (later wins)."""
    merged = k3s_file("config.yaml")
    if variant:
        merged |= yaml.safe_load((K3S / "config.yaml.d" / f"{variant}.yaml").read_text())
    return merged


def apiserver_args(cfg: Obj) -> dict[str, str]:
    return dict(a.split("=", 1) for a in cfg["kube-apiserver-arg"])


def _config_map() -> dict[str, str]:
    data: dict[str, str] = find("ConfigMap", "k8shost-config")["data"]
    return data


def _flashdns_settings() -> Any:
    w = find("Deployment", "flashdns-controller")
    (c,) = w["spec"]["template"]["spec"]["containers"]
    from controllers.flashdns.settings import FlashDnsSettings

    settings = programs.parse("flashdns-controller", c.get("args") or [], container_env(w, c))
    return FlashDnsSettings.from_args(settings.args)


@pytest.mark.parametrize("variant", [None, "ha-cluster-init", "ha-join"])
def test_server_configs_use_only_k3s_flags(variant: str | None) -> None:
    assert set(server(variant)) - SERVER_FLAGS == set()


def test_agent_config_uses_only_agent_flags_and_the_servers_data_dir() -> None:
    agent = k3s_file("agent-config.yaml")
    assert set(agent) - AGENT_FLAGS == set()
    assert agent["server"].startswith("https://") and agent["server"].endswith(":6443")
    assert agent["data-dir"] == server()["data-dir"] and agent["token-file"]


def test_bundled_components_are_replaced_by_the_suite() -> None:
    cfg = server()
    assert {"servicelb", "traefik", "local-storage", "coredns"} <= set(cfg["disable"]) <= DISABLE_ITEMS
    assert cfg["flannel-backend"] == "none" and cfg["disable-network-policy"] is True


def test_single_server_is_sqlite_and_ha_is_embedded_etcd() -> None:
    single, first, join = server(), server("ha-cluster-init"), server("ha-join")
    for cfg in (single, first, join):
        assert "datastore-endpoint" not in cfg  # SQLite alone, embedded etcd with cluster-init/server
    assert "cluster-init" not in single and "server" not in single
    assert first["cluster-init"] is True and "server" not in first
    assert "cluster-init" not in join and join["server"] == k3s_file("agent-config.yaml")["server"]
    assert first["token-file"] == join["token-file"] == k3s_file("agent-config.yaml")["token-file"]


def test_networks_agree_with_prismnet_and_flashdns() -> None:
    cfg, data = server(), _config_map()
    assert cfg["cluster-cidr"] == data["CLUSTER_CIDR"] == "10.244.0.0/16"
    assert cfg["service-cidr"] == data["SERVICE_CIDR"] == "10.96.0.0/12"
    assert cfg["cluster-domain"] == data["CLUSTER_DOMAIN"] == "cluster.local"
    agent = find("DaemonSet", "prismnet-agent")
    (c,) = [c for c in agent["spec"]["template"]["spec"]["containers"] if c["name"] == "prismnet-agent"]
    assert (
        str(programs.parse("prismnet-agent", c.get("args") or [], container_env(agent, c)).cluster_network)
        == (cfg["cluster-cidr"])
    )
    dns = find("Service", "cluster-dns")["spec"]["clusterIP"]
    flashdns = _flashdns_settings()
    assert cfg["cluster-dns"] == dns == str(flashdns.cluster_dns_ip) == "10.96.0.10"
    assert ipaddress.ip_address(dns) in ipaddress.ip_network(cfg["service-cidr"])
    assert flashdns.cluster_domain.rstrip(".") == cfg["cluster-domain"]


def test_apiserver_authenticates_through_the_iam_webhook_with_the_spec_cache_ttl() -> None:
    args = apiserver_args(server())
    assert args["authentication-token-webhook-config-file"] == "/etc/k8shost/iam-webhook.yaml"
    assert args["authentication-token-webhook-cache-ttl"] == "2m"
    assert args["authentication-token-webhook-version"] == "v1"
    kubeconfig = k3s_file("iam-webhook.yaml")
    assert kubeconfig["kind"] == "Config" and kubeconfig["current-context"] in {
        c["name"] for c in kubeconfig["contexts"]
    }


def test_audit_log_has_the_spec_rotation_and_a_policy() -> None:
    args = apiserver_args(server())
    assert args["audit-log-path"] == "/var/log/k8shost/audit.log"
    assert (args["audit-log-maxage"], args["audit-log-maxbackup"], args["audit-log-maxsize"]) == (
        "30",
        "10",
        "100",
    )
    assert args["audit-policy-file"] == "/etc/k8shost/audit-policy.yaml"  # no policy: nothing is logged


def audit_level(policy: Obj, group: str, resource: str, verb: str) -> str:
    """The level of the first rule matching a resource request (kube-apiserver's policy evaluation)."""
    for rule in policy["rules"]:
        if "nonResourceURLs" in rule or (rule.get("verbs") and verb not in rule["verbs"]):
            continue
        kinds = rule.get("resources")
        if kinds is None or any(
            k.get("group", "") == group and (not k.get("resources") or resource in k["resources"])
            for k in kinds
        ):
            level: str = rule["level"]
            return level
    return "None"


def test_audit_policy_is_valid_and_never_records_secret_or_token_bodies() -> None:
    policy = k3s_file("audit-policy.yaml")
    assert (policy["apiVersion"], policy["kind"]) == ("audit.k8s.io/v1", "Policy")
    known = {
        "level",
        "users",
        "userGroups",
        "verbs",
        "resources",
        "namespaces",
        "nonResourceURLs",
        "omitStages",
    }
    for rule in policy["rules"]:
        assert rule["level"] in AUDIT_LEVELS and set(rule) <= known, rule
    for group, resource in [("", "secrets"), ("", "configmaps"), ("authentication.k8s.io", "tokenreviews")]:
        for verb in ("create", "update", "get"):
            assert audit_level(policy, group, resource, verb) == "Metadata", (resource, verb)
    assert audit_level(policy, "rbac.authorization.k8s.io", "rolebindings", "create") == "RequestResponse"
    assert audit_level(policy, "", "services", "delete") == "Request"
    assert audit_level(policy, "", "pods", "list") == "Metadata"


def test_beta_apis_the_overlay_uses_are_enabled() -> None:
    """VolumeAttributesClass is storage.k8s.io/v1beta1 in 1.32: its gate and API group version are off
    by default, so `kubectl apply -k` would fail on a plain k3s."""
    used = {o["apiVersion"] for o in objects() if o["kind"] == "VolumeAttributesClass"}
    if not used:
        return
    cfg = server()
    args = apiserver_args(cfg)
    assert "VolumeAttributesClass=true" in args.get("feature-gates", "").split(",")
    assert "storage.k8s.io/v1beta1=true" in args.get("runtime-config", "").split(",")
    manager = dict(a.split("=", 1) for a in cfg["kube-controller-manager-arg"])
    assert "VolumeAttributesClass=true" in manager["feature-gates"].split(",")
