"""One JSON object per log line, configured once in each program's main()."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

# Attributes every LogRecord has; anything else was passed via `extra=` or a LoggerAdapter.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Hot path: the webhook logs one line per review, so this stays cheap (~5 us)."""

    _encode = json.JSONEncoder(separators=(",", ":"), default=str).encode

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # strftime once per second, not per line
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        out: dict[str, Any] = {
            "ts": f"{self._stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():  # extras keep the order they were given in
            if key not in _STANDARD and key[0] != "_":
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return self._encode(out)


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
