"""ControllerApp as a program (the demo controller run the way a Deployment runs it)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.controllers import machinery_demo
from tests.integration.controllers.machinery_kit import client_for, put_config_map


def run_demo(*argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, machinery_demo.__file__, *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_unreadable_kubeconfig_is_a_clear_json_error_and_exit_1(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    done = run_demo("--kubeconfig", str(missing), "--metrics-address", "off")
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    errors = [rec for rec in lines if rec["level"] == "error"]
    assert errors and str(missing) in errors[0]["msg"], done.stderr


def test_help_shows_common_and_own_flags_with_env_names() -> None:
    done = run_demo("--help")
    assert done.returncode == 0
    for text in ("--kubeconfig", "KUBECONFIG", "--leader-elect-renew-deadline", "DEMO_METRICS_ADDRESS",
                 "--namespace", "DEMO_NAMESPACE"):  # fmt: skip
        assert text in done.stdout


def test_without_leader_election_it_reconciles_serves_probes_and_exits_0_on_sigterm(
    kube_api: Any, tmp_path: Path
) -> None:
    log_path = tmp_path / "demo.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, machinery_demo.__file__, "--kubeconfig", str(kube_api.kubeconfig),
             "--leader-elect=false", "--metrics-address", "127.0.0.1:0", "--namespace", "default"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{_metrics_port(log_path, proc)}"
        _wait_ready(f"{base}/readyz", proc)
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'workqueue_depth{name="demo"}' in text
        asyncio.run(_put(kube_api.kubeconfig))
        deadline = time.monotonic() + 10
        while ((kube_api.get("configmaps", "default", "cm") or {}).get("data") or {}).get("mirror") != "s":
            assert time.monotonic() < deadline, "never reconciled"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert any("stopped" in r["msg"] for r in records)
    assert not [r for r in kube_api.requests if r.resource == "leases"], "no Lease without --leader-elect"


async def _put(kubeconfig: Path) -> None:
    async with client_for(kubeconfig) as client:
        await put_config_map(client, "default", "cm", source="s")


def _metrics_port(log: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        for line in log.read_text().splitlines():
            if line.startswith("{") and "metrics_port" in (rec := json.loads(line)):
                return int(rec["metrics_port"])
        time.sleep(0.05)
    raise AssertionError("the controller never logged its metrics port")


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the controller exited"
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never answered 200")
