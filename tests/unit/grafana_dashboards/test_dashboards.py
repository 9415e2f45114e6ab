"""The dashboards as code: the checked-in JSON is the generator's output (`make dashboards` rewrites it),
each file is a Grafana dashboard model whose panels query the `datasource` variable, and every panel's
PromQL parses (promtool's parser, through a rule file: Debian's promtool checks no bare expressions)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from common.metric_catalogue import CATALOGUE
from dashboards.__main__ import OUT, main, stale
from dashboards.catalogue import DASHBOARDS, OVERVIEW
from dashboards.grafana import build


def test_checked_in_json_is_the_generators_output() -> None:
    assert stale(OUT) == [], "run `make dashboards` and commit daemonsets/monitoring/dashboards/"


def test_check_names_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--out", str(tmp_path), "--check"]) == 0
    f = tmp_path / OVERVIEW.file_name
    f.write_text(f.read_text().replace("CNI ADD p99", "CNI ADD p95"))
    (tmp_path / "gone.json").write_text("{}")
    assert main(["--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert OVERVIEW.file_name in err and "gone.json" in err


def test_models_are_grafana_dashboards_with_unique_ids() -> None:
    uids = [d.uid for d in DASHBOARDS]
    assert len(set(uids)) == len(uids)
    for d in DASHBOARDS:
        model = build(d)
        assert model["uid"] == d.uid and model["title"] == d.title
        assert [v["name"] for v in model["templating"]["list"]] == ["datasource"]
        panels = model["panels"]
        assert [p["id"] for p in panels] == list(range(1, len(d.panels) + 1))
        assert len({(p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels}) == len(panels)  # no overlap
        for p, spec in zip(panels, d.panels, strict=True):
            assert p["type"] == spec.kind and p["datasource"]["uid"] == "${datasource}"
            assert [t["expr"] for t in p["targets"]] == [spec.expr]


def test_overview_covers_what_an_operator_looks_at_first() -> None:
    exprs = " ".join(p.expr for p in OVERVIEW.panels)
    for metric in ("up", "ovn_raft_role", "ovn_northd_status", "prismnet_geneve_tunnels",
                   "prismnet_cni_requests_total", "prismnet_cni_request_duration_seconds_bucket",
                   "fiberlb_pool_addresses", "flashdns_dns_queries_total",
                   "netpol_policy_to_acl_seconds_bucket",
                   "iam_webhook_reviews_total", "csi_rpc_total"):  # fmt: skip
        assert metric in exprs, metric


def test_every_query_parses(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: make setup (Debian's prometheus)"
    rules = [{"record": f"panel:{d.uid.replace('-', '_')}:{i}", "expr": p.expr}
             for d in DASHBOARDS for i, p in enumerate(d.panels)]  # fmt: skip
    f = tmp_path / "panels.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    proc = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.dumps(rules)  # every panel became a rule


def test_every_metric_a_panel_reads_is_catalogued() -> None:
    """A misspelt name would be an empty panel: each name is in common/metric_catalogue.py (histograms
    read through their `_bucket` series), or a scrape's own `up`."""
    known = {"up"}
    for spec in CATALOGUE:
        known |= {f"{spec.name}_bucket"} if spec.type == "histogram" else {spec.name}
    keywords = {"sum", "max", "min", "avg", "by", "without", "rate", "histogram_quantile", "and", "on", "le"}
    for d in DASHBOARDS:
        for p in d.panels:
            bare = re.sub(r"\{[^}]*\}|\[[^]]*\]|\"[^\"]*\"|\([^()]*\)(?=\s*\()", " ", p.expr)
            names = set(re.findall(r"[a-z_][a-z0-9_]*", bare)) - keywords
            names -= {w for w in names if re.search(rf"by \([^)]*\b{w}\b", p.expr) or f"on ({w})" in p.expr}
            assert names <= known, f"{d.uid} {p.title!r}: {sorted(names - known)} not in the catalogue"
