"""project-controller's memory per project namespace created and deleted (the soak's leak, isolated).

The API double and project-controller run as node-up runs them (`python -m nodeenv.kubeapi`,
`python -m controllers.projects.main`, each its own process, HTTPS on loopback). Project
namespaces are created one after the other through the official `kubernetes` client; each waits
for the controller's last template object (the allow-same-project NetworkPolicy), then the
previous namespace is deleted, as the soak's churn does. Every 100 namespaces it prints the
controller's RSS and open fds and the double's RSS, then the controller's RSS slope per namespace
after the first 100 (warm-up) by least squares.

Before the mmap-threshold pin (common/malloc.py) this printed +8.1 KB per namespace (80.9 -> 87.4 MB
over 600), after it +0.1 (81.1 -> 82.0 MB over 400). The growth is per TLS read rather than per
namespace, so the soak, whose watch events arrive spread out (more reads each), grew faster per
namespace (+9 MB/h at ~0.14 namespaces/s); the soak is the judge of the hourly target.

    make bench BENCH=projects_churn      # PROJECTS_CHURN_NAMESPACES (default 1000)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from bench.bench_kubeapi import start_daemon
from bench.soak_sampler import proc_of

WARMUP, EVERY = 100, 100
Daemon = subprocess.Popen[bytes]
LABELS = {"plasmacloud.io/project-id": "", "plasmacloud.io/org-id": "org-bench"}


def start_controller(kubeconfig: str, log: Path) -> Daemon:
    argv = [sys.executable, "-m", "controllers.projects.main", "--kubeconfig", kubeconfig,
            "--leader-elect=false", "--metrics-address=off", "--log-level", "warning"]  # fmt: skip
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def wait_filled(net: client.NetworkingV1Api, name: str, proc: Daemon) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            net.read_namespaced_network_policy("allow-same-project", name)
            return
        except ApiException as e:
            if e.status != 404:
                raise
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"project-controller did not fill {name} (exit {proc.poll()})")
        time.sleep(0.02)


def per_namespace_kb(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (namespaces, RSS MB), in KB per namespace."""
    n = len(points)
    if n < 2:
        return 0.0
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    return 0.0 if var == 0 else sum((p[0] - mx) * (p[1] - my) for p in points) / var * 1024


def churn(
    total: int, api: subprocess.Popen[bytes], ctrl: subprocess.Popen[bytes], info: dict[str, Any]
) -> None:
    config.load_kube_config(info["kubeconfig"])
    core, net = client.CoreV1Api(), client.NetworkingV1Api()
    points: list[tuple[int, float]] = []
    previous, started = "", time.monotonic()
    print(f"  {'namespaces':>10} {'ctrl RSS MB':>11} {'ctrl fds':>8} {'API RSS MB':>10} {'s':>6}")
    for i in range(total + 1):
        if i % EVERY == 0:
            mine, theirs = proc_of(ctrl.pid), proc_of(api.pid)
            if mine is None or theirs is None:
                raise RuntimeError("a daemon exited")
            print(f"  {i:>10} {mine.rss_mb:>11.1f} {mine.fds:>8} {theirs.rss_mb:>10.1f} "
                  f"{time.monotonic() - started:>6.0f}", flush=True)  # fmt: skip
            if i >= WARMUP:
                points.append((i, mine.rss_mb))
        if i == total:
            break
        name = f"bench-proj-{i}"
        core.create_namespace(
            {"metadata": {"name": name, "labels": {**LABELS, "plasmacloud.io/project-id": name}}}
        )
        wait_filled(net, name, ctrl)
        if previous:
            core.delete_namespace(previous)
        previous = name
    rate = total / (time.monotonic() - started)
    kb = per_namespace_kb(points)
    print(f"  project-controller RSS after {WARMUP} namespaces: {kb:+.2f} KB per namespace ({rate:.1f}/s)")


def main() -> None:
    total = int(os.environ.get("PROJECTS_CHURN_NAMESPACES", "1000"))
    with tempfile.TemporaryDirectory(prefix="bench-projects-") as tmp:
        work = Path(tmp)
        api, info = start_daemon(work)
        ctrl = start_controller(info["kubeconfig"], work / "project-controller.log")
        try:
            churn(total, api, ctrl, info)
        finally:
            for proc in (ctrl, api):
                proc.send_signal(signal.SIGTERM)
            for proc in (ctrl, api):
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
