"""The launcher (nodeenv/prometheus) with Debian's real Prometheus: a config it writes is accepted,
a target it names is scraped, a rule it loads fires, a file_sd target appears without a restart,
and stop() ends the process by PID."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from nodeenv.daemons import DaemonError, free_port, is_alive
from nodeenv.prometheus import (
    PrometheusApi,
    PrometheusConfig,
    PrometheusServer,
    PrometheusSettings,
    ScrapeConfig,
    write_file_sd,
)

RULES = """groups:
- name: launcher
  rules:
  - alert: DemoHigh
    expr: demo_value > 1
    labels: {severity: warning}
    annotations: {summary: demo above 1}
"""


@pytest.fixture
def exporter() -> Iterator[tuple[Gauge, int]]:
    registry = CollectorRegistry()
    gauge = Gauge("demo_value", "a value the test sets", registry=registry)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield gauge, port
    server.shutdown()
    thread.join()


def test_scrapes_fires_and_stops(tmp_path: Path, exporter: tuple[Gauge, int]) -> None:
    gauge, port = exporter
    rules = tmp_path / "rules.yml"
    rules.write_text(RULES)
    sd = tmp_path / "more.yml"
    write_file_sd(sd, [])
    config = PrometheusConfig(
        scrape_interval="1s",
        evaluation_interval="1s",
        rule_files=[rules],
        scrape_configs=[
            ScrapeConfig(job="demo", targets=[f"127.0.0.1:{port}"], labels={"tier": "test"}),
            ScrapeConfig(job="late", file_sd=[sd]),
        ],
    )
    server = PrometheusServer(PrometheusSettings(run_dir=tmp_path / "prom"), config)
    with server:
        api = PrometheusApi(server.url)
        (target,) = api.wait_targets_up(timeout=30)
        assert (target.job, target.instance, target.labels["tier"]) == ("demo", f"127.0.0.1:{port}", "test")
        assert api.query("up") and api.value('up{job="demo"}') == 1.0
        assert api.alerts() == []
        gauge.set(5)
        api.wait_firing("DemoHigh", timeout=20)
        (alert,) = api.firing("DemoHigh")
        assert alert.labels["severity"] == "warning" and alert.annotations["summary"] == "demo above 1"
        gauge.set(0)
        api.wait_resolved("DemoHigh", timeout=20)
        write_file_sd(sd, [([f"127.0.0.1:{port}"], {"tier": "late"})])
        api.wait(lambda: len(api.targets()) == 2, "the file_sd target", timeout=30)
        pid = server.table.load()[0]
        assert is_alive(pid)
    assert not is_alive(pid)
    assert server.table.load() == []


def test_bad_config_fails_with_promtools_words(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n- name: x\n  rules:\n  - alert: Broken\n    expr: rate(\n")
    server = PrometheusServer(
        PrometheusSettings(run_dir=tmp_path / "p"), PrometheusConfig(rule_files=[rules])
    )
    with pytest.raises(DaemonError, match=r"(?s)promtool check config.*parse error: unclosed"):
        server.start()
    assert server.table.load() == []
