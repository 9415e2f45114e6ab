"""One JSON object per log line, configured once in each program's main()."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

# Attributes every LogRecord has; anything else was passed via `extra=` or a LoggerAdapter.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class UtcClock:
    """ISO-8601 UTC timestamps with milliseconds; strftime once per second, not per line."""

    def __init__(self) -> None:
        self._second = -1
        self._stamp = ""

    def stamp(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"


encode_json_line = json.JSONEncoder(separators=(",", ":"), default=str).encode
"""The one encoder of log lines: compact, and anything JSON cannot encode becomes str()."""


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._clock = UtcClock()

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self._clock.stamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():  # extras keep the order they were given in
            if key not in _STANDARD and key[0] != "_":
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return encode_json_line(out)


def setup_logging(level: str = "info", *, json_format: bool = True) -> None:
    """Route the root logger to stderr, as JSON unless `json_format` is False."""
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
