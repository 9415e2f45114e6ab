from __future__ import annotations

import json
import logging

from common.jsonlog import JsonFormatter


def _record(**extra: object) -> logging.LogRecord:
    logger = logging.getLogger("test.jsonlog")
    return logger.makeRecord(
        "test.jsonlog", logging.WARNING, "f.py", 1, "port %s up", ("p1",), None, extra=extra
    )


def test_one_json_object_with_message_level_and_extras_in_order() -> None:
    line = JsonFormatter().format(_record(pod="ns/p", cid="abc", groups=3, cached=None))
    obj = json.loads(line)
    assert obj["msg"] == "port p1 up" and obj["level"] == "warning" and obj["logger"] == "test.jsonlog"
    assert [k for k in obj if k not in ("ts", "level", "logger", "msg")] == ["pod", "cid", "groups", "cached"]
    assert obj["ts"].endswith("Z") and obj["ts"][10] == "T"
    assert "\n" not in line


def test_values_json_cannot_encode_become_strings_and_tracebacks_are_kept() -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        rec = _record(obj=object())
        rec.exc_info = __import__("sys").exc_info()
    obj = json.loads(JsonFormatter().format(rec))
    assert obj["obj"].startswith("<object object")
    assert "ValueError: bad" in obj["exc"]


def test_timestamp_follows_the_record_across_seconds() -> None:
    fmt = JsonFormatter()
    first, second = _record(), _record()
    first.created, first.msecs = 1_700_000_000.25, 250
    second.created, second.msecs = 1_700_000_001.5, 500
    assert json.loads(fmt.format(first))["ts"] == "2023-11-14T22:13:20.250Z"
    assert json.loads(fmt.format(second))["ts"] == "2023-11-14T22:13:21.500Z"
