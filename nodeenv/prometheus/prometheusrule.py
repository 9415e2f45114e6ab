"""daemonsets/monitoring/prometheusrule.yaml from daemonsets/monitoring/rules.yml: the same rule groups
as prometheus-operator's PrometheusRule objects (monitoring.coreos.com/v1), one object per group.

`python -m nodeenv.prometheus.prometheusrule` (`make monitoring-rules`) rewrites the file; `--check`
exits 1 when the checked-in file differs from what the rules give (the unit test does the same).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "daemonsets" / "monitoring" / "rules.yml"
OUTPUT = ROOT / "daemonsets" / "monitoring" / "prometheusrule.yaml"
NAMESPACE = "kube-system"
LABELS = {"app.kubernetes.io/part-of": "k8shost", "app.kubernetes.io/component": "alerts"}
HEADER = (
    "# Generated from rules.yml by `make monitoring-rules` (nodeenv/prometheus/prometheusrule.py).\n"
    "# For prometheus-operator: kubectl apply -f daemonsets/monitoring/prometheusrule.yaml (its\n"
    "# ruleSelector must match these labels; add yours with kubectl label or a kustomize patch).\n"
)


def prometheus_rules(rules: dict[str, object]) -> list[dict[str, object]]:
    """One PrometheusRule per group of a Prometheus rule file, named after the group."""
    groups = rules["groups"]
    assert isinstance(groups, list)
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": g["name"], "namespace": NAMESPACE, "labels": dict(LABELS)},
            "spec": {"groups": [g]},
        }
        for g in groups
    ]


def render(rules_file: Path = RULES) -> str:
    docs = prometheus_rules(yaml.safe_load(rules_file.read_text()))
    return HEADER + "---\n".join(yaml.safe_dump(d, sort_keys=False, width=110) for d in docs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nodeenv.prometheus.prometheusrule", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--rules", type=Path, default=Path(os.environ.get("K8SHOST_ALERT_RULES", RULES)),
                   help="the plain rule file (env K8SHOST_ALERT_RULES)")  # fmt: skip
    p.add_argument("--output", type=Path, default=Path(os.environ.get("K8SHOST_PROMETHEUSRULE", OUTPUT)),
                   help="the PrometheusRule file (env K8SHOST_PROMETHEUSRULE)")  # fmt: skip
    p.add_argument("--check", action="store_true", help="exit 1 if --output differs, write nothing")
    args = p.parse_args(argv)
    text = render(args.rules)
    if args.check:
        same = args.output.exists() and args.output.read_text() == text
        print(f"{args.output}: {'up to date' if same else 'differs from ' + str(args.rules)}")
        return 0 if same else 1
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
