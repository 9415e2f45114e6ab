"""nodeenv/kubelet/teardown.py with real processes: one that ignores SIGTERM is killed by PID after
its grace, and a failing step does not stop the ones after it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodeenv.kubelet.teardown import Steps, stop_processes

IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
)


def _started(code: str) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline()  # its handler installed
    return p


def test_a_process_ignoring_sigterm_is_killed_after_its_grace() -> None:
    stubborn = _started(IGNORES_TERM)
    polite = _started("import time; print(1, flush=True); time.sleep(60)")
    t0 = time.monotonic()
    stop_processes([stubborn, polite], 0.5, "test")
    assert 0.4 < time.monotonic() - t0 < 5
    assert polite.returncode == -15 and stubborn.returncode == -9
    assert not Path(f"/proc/{stubborn.pid}").exists() and not Path(f"/proc/{polite.pid}").exists()


def test_every_step_runs_and_the_first_failure_is_raised_after() -> None:
    steps, ran = Steps("pod p"), []
    with steps.step("one"):
        raise subprocess.TimeoutExpired(["podman", "rm"], 120)
    with steps.step("two"):
        ran.append("two")
    with steps.step("three"):
        raise OSError("three")
    with pytest.raises(subprocess.TimeoutExpired):
        steps.done()
    assert ran == ["two"] and len(steps.errors) == 2
    Steps("nothing failed").done()
