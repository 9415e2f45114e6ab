"""The ovn-central Deployment's containers run as the manifest says, with no capabilities at all (as its
securityContext drops them), and its probes pass against them: the NB and SB ovsdb-servers through
ovn-ctl, ovn-northd directly (OVN 23.03's ovn-ctl has no foreground northd command).

Paths move into a temp dir (OVN_RUNDIR and friends, the probes' /var/run/ovn) and the databases listen
on loopback ports of our own; the commands and probes are otherwise the manifest's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.daemons import free_port
from tests.conftest import require_ovn
from tests.unit.daemonsets.rendered import find

NO_CAPS = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]


def _local(words: list[str], run: Path, db: Path) -> list[str]:
    return [w.replace("/var/run/ovn", str(run)).replace("/var/lib/ovn", str(db)) for w in words]


def _probe_ok(probe: dict[str, Any], run: Path, db: Path, env: dict[str, str]) -> bool:
    argv = _local(probe["exec"]["command"], run, db)
    return subprocess.run(argv, env=env, capture_output=True, timeout=10).returncode == 0


@pytest.fixture
def central(tmp_path: Path) -> Iterator[tuple[dict[str, Any], Path, Path, dict[str, str]]]:
    require_ovn()
    run, db, log, etc = (tmp_path / d for d in ("run", "db", "log", "etc"))
    for d in (run, db, log, etc):
        d.mkdir()
    env = {**os.environ, "OVN_RUNDIR": str(run), "OVN_DBDIR": str(db), "OVN_LOGDIR": str(log),
           "OVN_SYSCONFDIR": str(etc)}  # fmt: skip
    deployment = find("Deployment", "ovn-central")
    extra = {"nb": ["--db-nb-addr=127.0.0.1", f"--db-nb-port={free_port()}"],
             "sb": ["--db-sb-addr=127.0.0.1", f"--db-sb-port={free_port()}"]}  # fmt: skip
    procs = []
    try:
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            argv = [*NO_CAPS, *_local(c["command"], run, db), *extra.get(c["name"], [])]
            procs.append(
                subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        yield deployment, run, db, env
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
        for pidfile in run.glob("*.pid"):  # a daemon that outlived its ovn-ctl parent
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)


def test_ovn_central_runs_without_capabilities_and_its_probes_pass(central: Any) -> None:
    deployment, run, db, env = central
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert {c["name"] for c in containers} == {"nb", "sb", "northd"}
    for c in containers:
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    deadline = time.monotonic() + 20
    pending = {(c["name"], kind): c[kind] for c in containers for kind in ("readinessProbe", "livenessProbe")}
    while pending and time.monotonic() < deadline:
        pending = {k: p for k, p in pending.items() if not _probe_ok(p, run, db, env)}
        time.sleep(0.2)
    assert pending == {}, f"probes still failing: {sorted(pending)}"

    def status() -> str:
        argv = ["ovn-appctl", "-t", "ovn-northd", "status"]
        return subprocess.run(argv, env=env, capture_output=True, text=True).stdout.strip()

    while status() != "Status: active" and time.monotonic() < deadline:  # standby until it holds the SB lock
        time.sleep(0.2)
    assert status() == "Status: active"
