"""Teardowns that finish: each step tried whatever the ones before it did (a step that fails is
logged then, the first failure raised once every step has run), and processes stopped by PID
(SIGTERM, then SIGKILL after their grace period, as kubelet does)."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import time
from collections.abc import Iterable, Iterator

log = logging.getLogger(__name__)


class Steps:
    def __init__(self, what: str) -> None:
        self.what = what
        self.errors: list[Exception] = []

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        try:
            yield
        except Exception as e:
            log.warning("%s: %s failed (the rest goes on): %s", self.what, name, e)
            self.errors.append(e)

    def add(self, errors: Iterable[BaseException | None]) -> None:
        """Failures of steps run elsewhere (threads), already cleaned after."""
        self.errors += [e for e in errors if isinstance(e, Exception)]

    def done(self) -> None:
        """The first failure raised (the others were logged), after every step has run."""
        if self.errors:
            raise self.errors[0]


def stop_processes(procs: Iterable[subprocess.Popen[bytes]], grace: float, what: str) -> None:
    """SIGTERM to each, SIGKILL by PID to those still running after `grace` s; each reaped."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s: pid %d still running %.0f s after SIGTERM: killed", what, p.pid, grace)
            p.kill()
            p.wait()
