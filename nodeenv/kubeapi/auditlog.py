"""The audit log file, as kube-apiserver's `--audit-log-path` writes it: one audit.k8s.io/v1
Event per line (JSON), at the Metadata level for every request (there is no audit policy here).

Each Event names the user, the client's `sourceIPs` and `userAgent`, the verb, the object
(`objectRef`), the response code and the times the request arrived and was answered: the stage is
`ResponseComplete`, or `ResponseStarted` for a watch (recorded when its stream starts). So the
request log of a running double can be read from outside its process, e.g. which replica of a
controller wrote what: its node's address is its source IP (host network), its program its user
agent. Rotation as `--audit-log-maxsize` (MB; 0: never) and `--audit-log-maxbackup` (files kept).
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path

from nodeenv.kubeapi.auth import RequestRecord

API_VERSION = "audit.k8s.io/v1"


def micro_time(t: float) -> str:
    """RFC 3339 with microseconds, as the audit log's timestamps."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audit_event(rec: RequestRecord, answered: float) -> dict[str, object]:
    """The audit.k8s.io/v1 Event of one request, at the Metadata level."""
    ref = {"resource": rec.resource, "namespace": rec.namespace, "name": rec.name or rec.object_name,
           "apiGroup": rec.group, "apiVersion": rec.version, "subresource": rec.subresource}  # fmt: skip
    uri = rec.path + (f"?{rec.query}" if rec.query else "")
    event: dict[str, object] = {
        "kind": "Event",
        "apiVersion": API_VERSION,
        "level": "Metadata",
        "auditID": str(uuid.uuid4()),
        "stage": rec.stage,
        "requestURI": uri,
        "verb": rec.verb,
        "user": {"username": rec.user, "groups": list(rec.groups)},
        "sourceIPs": [rec.source_ip] if rec.source_ip else [],
        "userAgent": rec.user_agent,
        "objectRef": {k: v for k, v in ref.items() if v},
        "responseStatus": {"metadata": {}, "code": rec.status},
        "requestReceivedTimestamp": micro_time(rec.received or answered),
        "stageTimestamp": micro_time(answered),
    }
    if not rec.resource:
        del event["objectRef"]
    if rec.annotations:
        event["annotations"] = dict(rec.annotations)
    return event


class AuditLog:
    """Appends one JSON line per request to `path` (flushed at once), rotated by size."""

    def __init__(self, path: Path, max_size_mb: int = 100, max_backups: int = 1) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._handler = RotatingFileHandler(path, maxBytes=max_size_mb * 1024 * 1024, backupCount=max_backups,
                                            encoding="utf-8")  # fmt: skip

    def write(self, rec: RequestRecord, answered: float) -> None:
        line = json.dumps(audit_event(rec, answered), separators=(",", ":"))
        self._handler.handle(logging.makeLogRecord({"msg": line, "levelno": logging.INFO}))

    def close(self) -> None:
        self._handler.close()


def read_audit_log(path: Path) -> list[dict[str, object]]:
    """Every Event in `path` and its rotated backups (`path.1`, ...), oldest first."""
    backups = [p for p in path.parent.glob(f"{path.name}.*") if p.suffix[1:].isdigit()]
    files = [*sorted(backups, key=lambda p: int(p.suffix[1:]), reverse=True), path]
    lines = [line for f in files if f.exists() for line in f.read_text().splitlines()]
    return [json.loads(line) for line in lines if line.strip()]
