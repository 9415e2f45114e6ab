from __future__ import annotations

from itertools import islice

from ovsdbapp import exceptions  # type: ignore[import-untyped]

from ovnaccess.retry import RetryPolicy, is_transient


def test_backoff_doubles_up_to_its_cap() -> None:
    delays = list(islice(RetryPolicy(first_delay=0.1, max_delay=0.5).delays(), 5))
    assert delays == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_only_not_now_errors_are_transient() -> None:
    assert is_transient(exceptions.TimeoutException(commands=[], timeout=1, cause="TXN queue is full"))
    assert is_transient(RuntimeError("OVS transaction timed out"))
    assert not is_transient(RuntimeError("OVSDB Error: constraint violation"))
    assert not is_transient(ValueError("no free /24 left"))
