"""Bearer tokens -> users (a static token file in spirit), and the record of every request.

Usernames follow the apiserver's conventions: the admin is `kubernetes-admin` in `system:masters`;
`system:serviceaccount:<ns>:<name>` users get the groups `system:serviceaccounts` and
`system:serviceaccounts:<ns>`; everybody authenticated is in `system:authenticated`. A request
without a known token is 401 (anonymous auth is off).
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from dataclasses import dataclass

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


class Recorder:
    """The last `limit` requests of each sort, for tests to read in-process. Bounded: the daemon
    records too and nothing reads it there, and an unbounded list grew with every request (the soak
    saw the double's RSS rise by ~15 MB/h after its history was compacted)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.requests: deque[RequestRecord] = deque(maxlen=limit)  # resource requests, in arrival order
        self.nonresource: deque[RequestRecord] = deque(maxlen=limit)  # discovery, openapi, version, health

    def add(self, rec: RequestRecord) -> None:
        (self.requests if rec.resource else self.nonresource).append(rec)

    def clear(self) -> None:
        self.requests.clear()
        self.nonresource.clear()
