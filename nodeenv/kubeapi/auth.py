"""Bearer tokens -> users (a static token file in spirit), and the record of every request.

Usernames follow the apiserver's conventions: the admin is `kubernetes-admin` in `system:masters`;
`system:serviceaccount:<ns>:<name>` users get the groups `system:serviceaccounts` and
`system:serviceaccounts:<ns>`; everybody authenticated is in `system:authenticated`. A request
without a known token is 401 (anonymous auth is off).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodeenv.kubeapi.auditlog import AuditLog  # it imports RequestRecord from here

ADMIN = "kubernetes-admin"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...]


def groups_for(username: str) -> tuple[str, ...]:
    if username == ADMIN:
        return ("system:masters", "system:authenticated")
    if username.startswith("system:serviceaccount:"):
        ns = username.split(":")[2]
        return ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated")
    return ("system:authenticated",)


class Tokens:
    """Thread-safe: tests add users from their own thread while the server runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, User] = {}
        self._by_name: dict[str, str] = {}

    def token_for(self, username: str, groups: tuple[str, ...] | None = None) -> str:
        with self._lock:
            if username in self._by_name:
                return self._by_name[username]
            token = secrets.token_urlsafe(24)
            self._users[token] = User(username, groups if groups is not None else groups_for(username))
            self._by_name[username] = token
            return token

    def add(self, token: str, username: str, groups: tuple[str, ...] | None = None) -> None:
        with self._lock:
            self._users[token] = User(username, groups if groups is not None else groups_for(username))
            self._by_name.setdefault(username, token)

    def by_name(self) -> dict[str, str]:
        """username -> its token (what a restart with --data-dir reads back)."""
        with self._lock:
            return dict(self._by_name)

    def authenticate(self, header: str | None) -> User | None:
        if not header or not header.startswith("Bearer "):
            return None
        return self._users.get(header[7:].strip())


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request as the audit log would show it."""

    user: str
    verb: str
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    status: int
    path: str
    query: str = ""
    groups: tuple[str, ...] = ()
    user_agent: str = ""
    source_ip: str = ""
    """The client's address as this server sees it (its node's, for a host-network pod)."""
    received: float = 0.0
    """time.time() the request arrived"""
    stage: str = "ResponseComplete"
    """or ResponseStarted: a watch, recorded when its stream starts"""
    object_name: str = ""
    """A create's object name (from its body: not in the URL, so not `name`, which authorization
    sees); the audit log's objectRef names it as kube-apiserver's does."""
    annotations: tuple[tuple[str, str], ...] = ()
    """What admission plugins noted for the audit log (e.g. pod-security.kubernetes.io/audit-violations)."""


class Recorder:
    """The last `limit` requests of each sort, for tests to read in-process. Bounded: the daemon
    records too and nothing reads it there, and an unbounded list grew with every request (the soak
    saw the double's RSS rise by ~15 MB/h after its history was compacted). With an audit log
    (nodeenv/kubeapi/auditlog.py) every request is also written there, for readers outside."""

    def __init__(self, limit: int = 10_000, audit_log: AuditLog | None = None) -> None:
        self.requests: deque[RequestRecord] = deque(maxlen=limit)  # resource requests, in arrival order
        self.nonresource: deque[RequestRecord] = deque(maxlen=limit)  # discovery, openapi, version, health
        self.audit_log = audit_log

    def add(self, rec: RequestRecord) -> None:
        (self.requests if rec.resource else self.nonresource).append(rec)
        if self.audit_log is not None:
            self.audit_log.write(rec, time.time())

    def clear(self) -> None:
        self.requests.clear()
        self.nonresource.clear()
