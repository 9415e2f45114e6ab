"""The audit log file (`--audit-log-path`): one audit.k8s.io/v1 Event per request, rotated by size,
read back oldest first; its flags parsed with env fallbacks and bad values refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.kubeapi.auditlog import AuditLog, audit_event, read_audit_log
from nodeenv.kubeapi.auth import Recorder, RequestRecord
from nodeenv.kubeapi.settings import parse


def record(n: int = 0, **kw: object) -> RequestRecord:
    base: dict[str, object] = {
        "user": "system:serviceaccount:kube-system:x", "groups": ("system:authenticated",), "verb": "update",
        "group": "coordination.k8s.io", "version": "v1", "resource": "leases", "subresource": "",
        "namespace": "kube-system", "name": f"lease{n}", "status": 200,
        "path": f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/lease{n}",
        "user_agent": "fiberlb-controller/v0.1.0 (linux/amd64) k8shost", "source_ip": "10.250.0.12",
        "received": 1_700_000_000.25,
    }  # fmt: skip
    return RequestRecord(**{**base, **kw})  # type: ignore[arg-type]


def test_an_event_names_the_client_the_object_and_the_times() -> None:
    e = audit_event(record(query="timeout=10s"), answered=1_700_000_000.5)
    assert (e["kind"], e["apiVersion"], e["level"], e["stage"]) == ("Event", "audit.k8s.io/v1", "Metadata",
                                                                    "ResponseComplete")  # fmt: skip
    assert e["user"] == {
        "username": "system:serviceaccount:kube-system:x",
        "groups": ["system:authenticated"],
    }
    assert (e["sourceIPs"], e["userAgent"]) == (
        ["10.250.0.12"],
        "fiberlb-controller/v0.1.0 (linux/amd64) k8shost",
    )
    assert e["objectRef"] == {"resource": "leases", "namespace": "kube-system", "name": "lease0",
                              "apiGroup": "coordination.k8s.io", "apiVersion": "v1"}  # fmt: skip
    assert e["requestURI"].endswith("/leases/lease0?timeout=10s")
    assert e["responseStatus"] == {"metadata": {}, "code": 200}
    assert e["requestReceivedTimestamp"] == "2023-11-14T22:13:20.250000Z"
    assert e["stageTimestamp"] == "2023-11-14T22:13:20.500000Z"


def test_a_create_names_its_object_and_a_watch_is_logged_when_it_starts() -> None:
    create = audit_event(record(verb="create", name="", object_name="new", status=201), answered=0)
    assert create["objectRef"]["name"] == "new"  # type: ignore[index]
    watch = audit_event(record(verb="watch", name="", stage="ResponseStarted"), answered=0)
    assert watch["stage"] == "ResponseStarted" and "name" not in watch["objectRef"]  # type: ignore[operator]
    discovery = audit_event(record(resource="", group="", version="", path="/api"), answered=0)
    assert "objectRef" not in discovery


def test_the_recorder_writes_every_request_and_the_log_rotates_by_size(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path, max_size_mb=1, max_backups=1)
    rec = Recorder(limit=10, audit_log=log)
    n = 3000  # ~450 bytes each: more than 1 MB, so one rotation
    for i in range(n):
        rec.add(record(i))
    log.close()
    assert len(rec.requests) == 10, "the in-process record stays bounded"
    assert path.with_name("audit.log.1").exists()
    events = read_audit_log(path)
    names = [e["objectRef"]["name"] for e in events]  # type: ignore[index]
    assert names == [f"lease{i}" for i in range(n - len(names), n)], "oldest first, none lost in between"
    assert len(names) > n // 2


def test_flags_and_env_fallbacks(capsys: pytest.CaptureFixture[str]) -> None:
    s = parse(["--dir", "/tmp/x", "--audit-log-path", "/tmp/x/audit.log", "--audit-log-maxsize", "5"], {})
    assert (s.config.audit_log_path, s.config.audit_log_maxsize, s.config.audit_log_maxbackup) == (
        Path("/tmp/x/audit.log"), 5, 1)  # fmt: skip
    env = parse(["--dir", "/tmp/x"], {"KUBEAPI_AUDIT_LOG_PATH": "/a.log", "KUBEAPI_AUDIT_LOG_MAXBACKUP": "3"})
    assert (env.config.audit_log_path, env.config.audit_log_maxbackup) == (Path("/a.log"), 3)
    assert parse(["--dir", "/tmp/x"], {}).config.audit_log_path is None
    with pytest.raises(SystemExit):
        parse(["--dir", "/tmp/x", "--audit-log-maxsize", "-1"], {})
    assert "--audit-log-maxsize must be 0 or more" in capsys.readouterr().err
