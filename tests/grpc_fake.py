"""What the in-process fakes of PlasmaCloud's gRPC services share: a call log and one-shot faults."""

from __future__ import annotations

from typing import Any

import grpc


class CallLog:
    """Each RPC of a fake calls `_enter(name, context)` first: recorded, and aborted with
    `fail_next` (then cleared) when a test set one."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail_next: grpc.StatusCode | None = None

    def _enter(self, name: str, context: Any) -> None:
        self.calls.append(name)
        if self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            context.abort(code, "injected failure")
