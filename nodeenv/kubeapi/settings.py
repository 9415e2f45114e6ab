"""The only reader of argv and the environment for the daemon. Every flag has an environment fallback."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.kubeapi.kubeletclient import KubeletClientConfig
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubeapi.tokenwebhook import VERSIONS, parse_duration


@dataclass(frozen=True, slots=True)
class Listener:
    """A further listener inside another network namespace (a cluster's underlay, for its nodes)."""

    netns: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        """`NETNS=HOST:PORT`."""
        netns, _, address = text.partition("=")
        host, _, port = address.rpartition(":")
        if not netns or not host or not port.isdigit():
            raise ValueError(f"listener {text!r}: NETNS=HOST:PORT")
        return cls(netns, host, int(port))

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"


DESCRIPTION = (
    "Kubernetes API test double (DEVELOPMENT ONLY): serves the kube-apiserver REST API for the kinds "
    "the k8shost suite uses over HTTPS with a dev CA and bearer tokens; writes an admin kubeconfig "
    "(and one per --user) into --dir. Stops cleanly on SIGTERM."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeApiSettings:
    dir: Path
    """PKI, admin.kubeconfig and users/<name>.kubeconfig are written here."""
    host: str = "127.0.0.1"
    port: int = 6443
    port_file: Path | None = None
    """Written after binding: {"https": port, "url": ..., "kubeconfig": ...} (for port 0)."""
    users: tuple[str, ...] = ()
    also: tuple[Listener, ...] = ()
    """Further listeners inside other network namespaces (`--also-listen NETNS=HOST:PORT,...`)."""
    config: ApiConfig = field(default_factory=ApiConfig)
    log_level: str = "info"


_FLAGS = (
    ("--dir", "KUBEAPI_DIR", None, "directory for the PKI and kubeconfigs (required)"),
    ("--host", "KUBEAPI_HOST", "127.0.0.1", "HTTPS listen address"),
    ("--port", "KUBEAPI_PORT", "6443", "HTTPS port (0: pick a free one)"),
    ("--port-file", "KUBEAPI_PORT_FILE", None, "write the bound port, URL and kubeconfig path here as JSON"),
    ("--user", "KUBEAPI_USERS", "", "also write kubeconfigs for these usernames, comma-separated"),
    (
        "--also-listen",
        "KUBEAPI_ALSO_LISTEN",
        "",
        "also serve inside these network namespaces, NETNS=HOST:PORT comma-separated (admin kubeconfig "
        "<dir>/<netns>.kubeconfig each)",
    ),
    ("--service-cidr", "KUBEAPI_SERVICE_CIDR", "10.96.0.0/16", "ClusterIP range (kube-apiserver's flag)"),
    ("--bookmark-interval", "KUBEAPI_BOOKMARK_INTERVAL", "60", "seconds between watch BOOKMARK events"),
    ("--watch-timeout", "KUBEAPI_WATCH_TIMEOUT", "1800", "seconds a watch without timeoutSeconds lasts"),
    ("--history-limit", "KUBEAPI_HISTORY_LIMIT", "100000", "watch events kept; older versions get 410"),
    ("--event-ttl", "KUBEAPI_EVENT_TTL", "1h", "how long an Event is kept after its last write (0: forever)"),
    (
        "--compaction-interval",
        "KUBEAPI_COMPACTION_INTERVAL",
        "300",
        "seconds between history compactions, as kube-apiserver's --etcd-compaction-interval (0: never)",
    ),
    ("--enforce-rbac", "KUBEAPI_ENFORCE_RBAC", "false", "authorize non-admin users by RBAC objects"),
    ("--enforce-quota", "KUBEAPI_ENFORCE_QUOTA", "false", "ResourceQuota object counts: admission + status"),
    (
        "--audit-log-path",
        "KUBEAPI_AUDIT_LOG_PATH",
        "",
        "write every request to this file as audit.k8s.io/v1 Events, one JSON line each (empty: no log)",
    ),
    ("--audit-log-maxsize", "KUBEAPI_AUDIT_LOG_MAXSIZE", "100", "MB before the audit log rotates (0: never)"),
    ("--audit-log-maxbackup", "KUBEAPI_AUDIT_LOG_MAXBACKUP", "1", "rotated audit log files kept"),
    (
        "--authentication-token-webhook-config-file",
        "KUBEAPI_TOKEN_WEBHOOK_CONFIG",
        "",
        "kubeconfig naming a TokenReview webhook for bearer tokens the static table does not know "
        "(kube-apiserver's flag; empty: none)",
    ),
    (
        "--authentication-token-webhook-cache-ttl",
        "KUBEAPI_TOKEN_WEBHOOK_CACHE_TTL",
        "2m",
        "how long the webhook's answers (refusals too) are cached",
    ),
    ("--authentication-token-webhook-version", "KUBEAPI_TOKEN_WEBHOOK_VERSION", "v1", "TokenReview version"),
    (
        "--admission-control-config-file",
        "KUBEAPI_ADMISSION_CONTROL_CONFIG_FILE",
        "",
        "kube-apiserver's AdmissionConfiguration file: the PodSecurity plugin's defaults and exemptions "
        "(empty: privileged by default, no exemptions)",
    ),
    ("--kubelet-client-certificate", "KUBEAPI_KUBELET_CLIENT_CERT", "",
     "client certificate presented to the kubelets (kube-apiserver's flag; empty: none)"),
    ("--kubelet-client-key", "KUBEAPI_KUBELET_CLIENT_KEY", "", "its key"),
    ("--kubelet-certificate-authority", "KUBEAPI_KUBELET_CA", "",
     "CA the kubelets' serving certificates are verified against (empty: not verified, as kube-apiserver)"),
    ("--kubelet-netns", "KUBEAPI_KUBELET_NETNS", "",
     "network namespace the nodes' kubelets are reached from (a cluster's underlay; empty: this one)"),
    ("--data-dir", "KUBEAPI_DATA_DIR", "",
     "keep the objects here across restarts, every write fsynced (k3s's datastore); the PKI and tokens "
     "in --dir are kept too (empty: in memory, a fresh PKI each start)"),
    ("--log-level", "KUBEAPI_LOG_LEVEL", "info", "log level"),
)  # fmt: skip


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nodeenv.kubeapi", description=DESCRIPTION)
    for flag, var, default, text in _FLAGS:
        p.add_argument(flag, default=env.get(var, default), help=f"{text} (env {var}; default {default})")
    return p


def _truthy(value: str) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


def _count(flag: str, value: str) -> int:
    n = int(value)
    if n < 0:
        raise ValueError(f"{flag} must be 0 or more, not {value}")
    return n


def _path(value: str) -> Path | None:
    return Path(value) if value else None


def _pod_security(path: str) -> PodSecurityConfig:
    if not path:
        return PodSecurityConfig()
    try:
        return PodSecurityConfig.load(Path(path))
    except OSError as e:
        raise ValueError(f"--admission-control-config-file {path}: {e.strerror}") from e


def parse(argv: Sequence[str], env: Mapping[str, str]) -> KubeApiSettings:
    parser = build_parser(env)
    a = parser.parse_args(list(argv))
    if not a.dir:
        parser.error("--dir (or KUBEAPI_DIR) is required")
    if a.authentication_token_webhook_version not in VERSIONS:
        parser.error(f"--authentication-token-webhook-version: one of {', '.join(VERSIONS)}")
    try:
        config = ApiConfig(
            service_cidr=a.service_cidr,
            bookmark_interval=float(a.bookmark_interval),
            watch_timeout=float(a.watch_timeout),
            history_limit=int(a.history_limit),
            compaction_interval=float(a.compaction_interval),
            enforce_rbac=_truthy(a.enforce_rbac),
            enforce_quota=_truthy(a.enforce_quota),
            audit_log_path=Path(a.audit_log_path) if a.audit_log_path else None,
            audit_log_maxsize=_count("--audit-log-maxsize", a.audit_log_maxsize),
            audit_log_maxbackup=_count("--audit-log-maxbackup", a.audit_log_maxbackup),
            token_webhook_config=Path(a.authentication_token_webhook_config_file)
            if a.authentication_token_webhook_config_file
            else None,
            token_webhook_cache_ttl=parse_duration(a.authentication_token_webhook_cache_ttl),
            token_webhook_version=a.authentication_token_webhook_version,
            pod_security=_pod_security(a.admission_control_config_file),
            event_ttl=parse_duration(a.event_ttl),
            kubelet=KubeletClientConfig(
                cert=_path(a.kubelet_client_certificate),
                key=_path(a.kubelet_client_key),
                ca=_path(a.kubelet_certificate_authority),
                netns=a.kubelet_netns,
            ),
            data_dir=_path(a.data_dir),
        )
        return KubeApiSettings(
            dir=Path(a.dir),
            host=a.host,
            port=int(a.port),
            port_file=Path(a.port_file) if a.port_file else None,
            users=tuple(u.strip() for u in a.user.split(",") if u.strip()),
            also=tuple(Listener.parse(x.strip()) for x in a.also_listen.split(",") if x.strip()),
            config=config,
            log_level=a.log_level,
        )
    except ValueError as e:
        parser.error(str(e))
        raise  # unreachable: parser.error exits
