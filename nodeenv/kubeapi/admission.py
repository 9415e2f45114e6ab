"""What admission plugins read from and add to the request being served: the user, and the
warnings (sent as `Warning` headers) and audit annotations (on the request's audit Event) they add.

kube-apiserver passes these in the request's context; the double does the same with a ContextVar
that handlers.py sets for each request (aiohttp serves each request in its own task, so each has its
own). Writes made outside a request (the double's own controllers, tests calling Resources directly)
see no user and their warnings and annotations go nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(slots=True)
class AdmissionRecord:
    user: str = ""
    subresource: str = ""
    """the subresource the request addressed (a write through /scale updates the workload itself)"""
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


_CURRENT: ContextVar[AdmissionRecord | None] = ContextVar("kubeapi_admission", default=None)


def current() -> AdmissionRecord:
    """The request's record (a throwaway one outside a request)."""
    return _CURRENT.get() or AdmissionRecord()


@contextmanager
def serving(record: AdmissionRecord) -> Iterator[AdmissionRecord]:
    token = _CURRENT.set(record)
    try:
        yield record
    finally:
        _CURRENT.reset(token)
