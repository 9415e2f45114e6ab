from __future__ import annotations

import asyncio
import io
import json

from webhook.reviewlog import ReviewLog


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


def _record(log: ReviewLog, user: str | None = "u@example.com", reason: str | None = None) -> None:
    log.record("authenticated" if reason is None else "rejected", user=user, groups=3, reason=reason,
               cached=False, api_version="authentication.k8s.io/v1")  # fmt: skip


async def test_reviews_of_one_loop_turn_share_one_write() -> None:
    stream = CountingStream()
    log = ReviewLog(stream)
    for _ in range(5):
        _record(log)
    assert stream.getvalue() == ""  # nothing yet: written at the end of this turn
    await asyncio.sleep(0)
    assert stream.writes == 1
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert len(lines) == 5 and all(x["msg"] == "review authenticated" and x["groups"] == 3 for x in lines)
    _record(log, reason="token expired")
    await asyncio.sleep(0)
    assert stream.writes == 2 and json.loads(stream.getvalue().splitlines()[-1])["reason"] == "token expired"


def test_without_a_loop_the_line_is_written_at_once_and_stays_valid_json() -> None:
    stream = CountingStream()
    hostile = 'a"b\\c\n{"authenticated": true}'
    _record(ReviewLog(stream), user=hostile)
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line)["user"] == hostile


def test_disabled_writes_nothing() -> None:
    stream = CountingStream()
    _record(ReviewLog(stream, enabled=False))
    assert stream.writes == 0


async def test_flush_writes_what_is_pending() -> None:
    stream = CountingStream()
    log = ReviewLog(stream)
    _record(log)
    log.flush()  # e.g. at shutdown, before the scheduled flush ran
    await asyncio.sleep(0)
    assert len(stream.getvalue().splitlines()) == 1 and stream.writes == 1
