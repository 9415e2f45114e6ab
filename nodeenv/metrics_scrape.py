"""Scraping the daemons' /metrics as Prometheus does (in the namespace each listens in), reading the
text back with prometheus_client's parser, and linting it with Debian's promtool when installed.
`targets` names every daemon of a node environment by the endpoints its components wrote."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from common import metric_catalogue as cat
from nodeenv.daemons import http_get_in

NODE_KEYS = {
    cat.AGENT: "PRISMNET_METRICS", cat.FLASHDNS: "FLASHDNS_METRICS", cat.CSI: "CSI_METRICS_URL",
    cat.FIBERLB: "FIBERLB_METRICS", cat.NETPOL: "NETPOL_METRICS", cat.NODES: "NODE_CONTROLLER_METRICS",
    cat.PROJECTS: "PROJECTS_METRICS",
}  # fmt: skip
"""Component -> the node.env key of its /metrics URL (those a node runs)."""


@dataclass(frozen=True)
class Target:
    component: str
    where: str
    netns: str
    url: str

    def scrape(self) -> str:
        if not self.netns:
            return scrape(self.url)
        status, body = http_get_in(self.netns, self.url, timeout=10)
        if status != 200:
            raise OSError(f"{self.url} in {self.netns}: HTTP {status}")
        return body


def targets(
    nodes: list[tuple[str, str, Mapping[str, str]]], cluster_env: Mapping[str, str]
) -> Iterator[Target]:
    """Every daemon: each node's (name, netns, node.env) own, the central's exporters (in the underlay
    namespace, `OVN_CENTRAL_METRICS`) and the webhook (this namespace, `WEBHOOK_HEALTH_URL`)."""
    for name, netns, env in nodes:
        for component, key in NODE_KEYS.items():
            if env.get(key):
                yield Target(component, name, netns, env[key])
    central = [u for u in cluster_env.get("OVN_CENTRAL_METRICS", "").split(",") if u]
    for i, url in enumerate(central, 1):
        yield Target(cat.CENTRAL, f"member {i}", cluster_env.get("K8SHOST_UNDERLAY_NETNS", ""), url)
    if cluster_env.get("WEBHOOK_HEALTH_URL"):
        yield Target(cat.WEBHOOK, "control", "", cluster_env["WEBHOOK_HEALTH_URL"] + "/metrics")


def scrape(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return str(resp.read().decode())


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] (counters under their `_total` name, histograms' `_bucket`...)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    """The sum of `name`'s samples with these labels (None: no such sample)."""
    found = [v for got, v in samples(text).get(name, []) if all(got.get(k) == w for k, w in labels.items())]
    return sum(found) if found else None


def families(text: str) -> set[str]:
    """Metric names as the catalogue lists them (a counter with `_total`, a histogram bare)."""
    fams = list(text_string_to_metric_families(text))
    bases = {f.name for f in fams}
    out = set()
    for fam in fams:
        if fam.name.endswith("_created") and fam.name.removesuffix("_created") in bases:
            continue  # prometheus_client's creation time of a counter/histogram, not a metric of ours
        out.add(fam.name + "_total" if fam.type == "counter" else fam.name)
    return out


def missing_names(target: Target, text: str) -> set[str]:
    return {m.name for m in cat.by_component(target.component)} - families(text)


def promtool_problems(text: str) -> str:
    """`promtool check metrics` findings ('' when clean, or when promtool is not installed)."""
    if shutil.which("promtool") is None:
        return ""
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    return "" if out.returncode == 0 else (out.stdout + out.stderr).strip()
