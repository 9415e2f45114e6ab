"""prometheus.yml from typed scrape configs: what the caller scrapes, how, and the rule files.

The field names are Prometheus' own (`scrape_configs`, `file_sd_configs`, `kubernetes_sd_configs`,
`tls_config`, `authorization`, `proxy_url`); relabelling rules are Prometheus' relabel_config
mappings, passed through as given (their language is Prometheus', not ours to re-model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """A scrape's or service discovery's `tls_config`."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""
    insecure_skip_verify: bool = False

    def to_yaml(self) -> dict[str, object]:
        out: dict[str, object] = {
            k: str(v) for k, v in (("ca_file", self.ca_file), ("cert_file", self.cert_file),
                                   ("key_file", self.key_file)) if v is not None
        }  # fmt: skip
        if self.server_name:
            out["server_name"] = self.server_name
        if self.insecure_skip_verify:
            out["insecure_skip_verify"] = True
        return out


def _auth(tls: TlsConfig | None, bearer_token_file: Path | None) -> dict[str, object]:
    out: dict[str, object] = {}
    if tls is not None:
        out["tls_config"] = tls.to_yaml()
    if bearer_token_file is not None:
        out["authorization"] = {"type": "Bearer", "credentials_file": str(bearer_token_file)}
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class KubernetesSd:
    """One `kubernetes_sd_configs` entry: list and watch `role` objects on `api_server`."""

    api_server: str
    role: str = "pod"
    namespaces: Sequence[str] = ()
    tls: TlsConfig | None = None
    bearer_token_file: Path | None = None
    selectors: Sequence[Mapping[str, str]] = ()
    """Prometheus' `selectors` entries ({"role": ..., "label": ..., "field": ...})."""

    def to_yaml(self) -> dict[str, object]:
        out: dict[str, object] = {"api_server": self.api_server, "role": self.role}
        if self.namespaces:
            out["namespaces"] = {"names": list(self.namespaces)}
        if self.selectors:
            out["selectors"] = [dict(s) for s in self.selectors]
        return {**out, **_auth(self.tls, self.bearer_token_file)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrapeConfig:
    """One scrape job: its targets (static, file_sd, kubernetes_sd) and how to reach them."""

    job: str
    targets: Sequence[str] = ()
    """Static host:port targets."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of the static targets."""
    file_sd: Sequence[Path] = ()
    """Files of targets (JSON or YAML) Prometheus re-reads when they change."""
    kubernetes_sd: Sequence[KubernetesSd] = ()
    scheme: str = "http"
    metrics_path: str = "/metrics"
    tls: TlsConfig | None = None
    bearer_token_file: Path | None = None
    proxy_url: str = ""
    scrape_interval: str = ""
    """'' = the global one."""
    relabel_configs: Sequence[Mapping[str, object]] = ()
    metric_relabel_configs: Sequence[Mapping[str, object]] = ()

    def to_yaml(self) -> dict[str, object]:
        out: dict[str, object] = {
            "job_name": self.job,
            "scheme": self.scheme,
            "metrics_path": self.metrics_path,
        }
        if self.scrape_interval:
            out["scrape_interval"] = self.scrape_interval
        if self.targets:
            out["static_configs"] = [{"targets": list(self.targets), "labels": dict(self.labels)}]
        if self.file_sd:
            out["file_sd_configs"] = [{"files": [str(f) for f in self.file_sd], "refresh_interval": "5s"}]
        if self.kubernetes_sd:
            out["kubernetes_sd_configs"] = [k.to_yaml() for k in self.kubernetes_sd]
        if self.proxy_url:
            out["proxy_url"] = self.proxy_url
        if self.relabel_configs:
            out["relabel_configs"] = [dict(r) for r in self.relabel_configs]
        if self.metric_relabel_configs:
            out["metric_relabel_configs"] = [dict(r) for r in self.metric_relabel_configs]
        return {**out, **_auth(self.tls, self.bearer_token_file)}


@dataclass(frozen=True, slots=True, kw_only=True)
class PrometheusConfig:
    """The whole prometheus.yml: global intervals, rule files, scrape jobs."""

    scrape_configs: Sequence[ScrapeConfig] = ()
    rule_files: Sequence[Path] = ()
    scrape_interval: str = "15s"
    evaluation_interval: str = "15s"
    scrape_timeout: str = ""
    """'' = Prometheus' default (10 s, capped at the scrape interval)."""
    external_labels: Mapping[str, str] = field(default_factory=dict)

    def to_yaml(self) -> str:
        glob: dict[str, object] = {
            "scrape_interval": self.scrape_interval,
            "evaluation_interval": self.evaluation_interval,
        }
        if self.scrape_timeout:
            glob["scrape_timeout"] = self.scrape_timeout
        if self.external_labels:
            glob["external_labels"] = dict(self.external_labels)
        doc = {
            "global": glob,
            "rule_files": [str(f) for f in self.rule_files],
            "scrape_configs": [s.to_yaml() for s in self.scrape_configs],
        }
        return str(yaml.safe_dump(doc, sort_keys=False))


def write_file_sd(path: Path, groups: Sequence[tuple[Sequence[str], Mapping[str, str]]]) -> None:
    """A file_sd targets file ([{"targets": [...], "labels": {...}}, ...]), replaced atomically so
    Prometheus never reads half of it."""
    doc = [{"targets": list(t), "labels": dict(labels)} for t, labels in groups]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
