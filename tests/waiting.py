"""Waiting in tests for a state a daemon reaches on its own."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def eventually(check: Callable[[], bool], what: Callable[[], str], timeout: float = 30) -> None:
    """Poll `check()` every 0.2 s; fail the test naming `what()` (built only then, so it can show
    the state at the timeout) if it is still false after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what()}")
