"""The per-review log line: one JSON object per TokenReview, never the token.

This is the webhook's hot path (thousands of reviews a second), so the line skips the
`logging` machinery (record, adapter, handler lock: ~30 us a line) and is written in the
same JSON shape as every other line (`common.jsonlog`), by the event loop itself: lines of
the reviews finished in one loop turn go out in one write at the end of that turn. The
window in which a crash loses lines is that turn, not a timer.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TextIO

from common.jsonlog import UtcClock, encode_json_line

LOGGER = "webhook.review"


class ReviewLog:
    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.stream = stream  # None: sys.stderr at write time (where setup_logging writes)
        self.enabled = enabled
        self._clock = UtcClock()
        self._pending: list[str] = []
        self._scheduled = False

    def record(
        self,
        result: str,
        *,
        user: str | None,
        groups: int,
        reason: str | None,
        cached: bool,
        api_version: str,
    ) -> None:
        if not self.enabled:
            return
        line = encode_json_line({
            "ts": self._clock.stamp(time.time()), "level": "info", "logger": LOGGER,
            "msg": f"review {result}", "user": user, "groups": groups, "result": result,
            "reason": reason, "cached": cached, "api_version": api_version,
        })  # fmt: skip
        self._pending.append(line)
        if self._scheduled:
            return
        try:
            asyncio.get_running_loop().call_soon(self.flush)
            self._scheduled = True
        except RuntimeError:  # no loop (tests, shutdown): write now
            self.flush()

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write("\n".join(lines) + "\n")
        stream.flush()
