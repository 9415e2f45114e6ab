"""Scraping a daemon's /metrics as Prometheus does, and linting it with Debian's promtool."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


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


def promtool_problems(text: str) -> str:
    """`promtool check metrics` findings ('' when clean, or when promtool is not installed)."""
    if shutil.which("promtool") is None:
        return ""
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    return "" if out.returncode == 0 else (out.stdout + out.stderr).strip()
