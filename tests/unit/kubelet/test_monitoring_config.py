"""The boot's scrape configuration (nodeenv/kubelet/monitoring.py): accepted by vmagent's strict parser,
refused by Debian's promtool for the reason the boot uses vmagent (no kubernetes_sd_configs there)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv.kubelet.monitoring import METRICS_PORT, scrape_config


def _written(tmp_path: Path) -> Path:
    f = tmp_path / "scrape.yml"
    cfg = scrape_config("https://10.250.0.1:6443", tmp_path / "ca.crt", tmp_path / "token")
    f.write_text(yaml.safe_dump(cfg))
    return f


def test_vmagent_accepts_it_strictly(tmp_path: Path) -> None:
    vmagent = shutil.which("vmagent")
    assert vmagent, "vmagent is not installed: make setup (Debian's victoria-metrics)"
    argv = [vmagent, f"-promscrape.config={_written(tmp_path)}", "-promscrape.config.strictParse",
            "-promscrape.config.dryRun"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_debian_prometheus_has_no_kubernetes_discovery(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: make setup (Debian's prometheus)"
    proc = subprocess.run(
        [promtool, "check", "config", str(_written(tmp_path))], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "kubernetes_sd_configs not found" in proc.stdout + proc.stderr


def test_keeps_metrics_ports_of_running_pods_of_ours(tmp_path: Path) -> None:
    job = scrape_config("https://api:6443", tmp_path / "ca", tmp_path / "tok")["scrape_configs"][0]
    keep = {r["source_labels"][0]: r["regex"] for r in job["relabel_configs"] if r.get("action") == "keep"}
    assert keep == {"__meta_kubernetes_pod_container_port_name": METRICS_PORT,
                    "__meta_kubernetes_pod_phase": "Running"}  # fmt: skip
    sd = job["kubernetes_sd_configs"][0]
    assert sd["selectors"] == [{"role": "pod", "label": "app.kubernetes.io/part-of=k8shost"}]
    assert sd["authorization"] == {"credentials_file": str(tmp_path / "tok")}  # the token file, never inline
