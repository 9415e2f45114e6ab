"""The alert rules (daemonsets/monitoring/rules.yml): valid for promtool, every alert unit-tested both
ways by promtool (tests/monitoring/*.test.yml), labelled and annotated with a runbook that exists, and
the PrometheusRule objects generated from the same file. promtool missing fails (make setup installs
Debian's prometheus package)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeenv.prometheus import require_binary
from nodeenv.prometheus.prometheusrule import OUTPUT, RULES, prometheus_rules, render

ROOT = Path(__file__).resolve().parents[3]
TESTS = sorted((ROOT / "tests" / "monitoring").glob("*.test.yml"))
RUNBOOK_SECTIONS = ("## Meaning", "## Impact", "## First commands")


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


ALERTS = _alerts()


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("promtool"), *args], capture_output=True, text=True, cwd=ROOT)


def test_promtool_check_rules() -> None:
    proc = _promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in proc.stdout


def test_promtool_unit_tests_pass() -> None:
    assert TESTS, "no tests/monitoring/*.test.yml"
    proc = _promtool("test", "rules", *map(str, TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _cases() -> dict[str, set[str]]:
    """Per alert: 'fires' if some test case expects it, 'quiet' if some case expects none of it."""
    out: dict[str, set[str]] = {}
    for path in TESTS:
        for t in yaml.safe_load(path.read_text())["tests"]:
            for case in t.get("alert_rule_test", []):
                out.setdefault(case["alertname"], set()).add("fires" if case.get("exp_alerts") else "quiet")
    return out


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = _cases()
    missing = {a["alert"]: {"fires", "quiet"} - cases.get(a["alert"], set()) for a in ALERTS}
    assert {k: v for k, v in missing.items() if v} == {}
    assert set(cases) <= {a["alert"] for a in ALERTS}, "a test names an alert that does not exist"


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a["alert"])
def test_alert_is_labelled_and_has_its_runbook(alert: dict[str, Any]) -> None:
    name = alert["alert"]
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", name)
    assert alert["labels"]["severity"] in ("critical", "warning")
    ann = alert["annotations"]
    assert ann["summary"] and ann["description"]
    assert ann["runbook_url"] == f"docs/runbooks/{name}.md"
    runbook = (ROOT / ann["runbook_url"]).read_text()
    assert runbook.startswith(f"# {name}\n")
    for section in RUNBOOK_SECTIONS:
        assert section in runbook, f"{ann['runbook_url']} has no {section!r}"
    commands = runbook.partition("## First commands")[2]
    assert "```" in commands, f"{ann['runbook_url']}: first commands in a code block"


def test_alert_names_are_unique() -> None:
    names = [a["alert"] for a in ALERTS]
    assert len(names) == len(set(names))


def test_prometheusrule_is_generated_from_rules() -> None:
    assert OUTPUT.read_text() == render(), "run `make monitoring-rules`"
    objects = [d for d in yaml.safe_load_all(OUTPUT.read_text()) if d]
    assert objects == prometheus_rules(yaml.safe_load(RULES.read_text()))
    assert [r["alert"] for o in objects for g in o["spec"]["groups"] for r in g["rules"]] == [
        a["alert"] for a in ALERTS
    ]
    assert {(o["apiVersion"], o["kind"]) for o in objects} == {("monitoring.coreos.com/v1", "PrometheusRule")}
