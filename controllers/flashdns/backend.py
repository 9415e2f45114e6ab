"""Where the records go: one interface, two implementations (embedded zone, FlashDNS gRPC)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from controllers.flashdns.records import RecordSet

Desired = Callable[[], dict[str, RecordSet]]
"""Every owner's records as the informer caches say now (for full resyncs)."""


class RecordBackend(Protocol):
    name: str
    serves_dns: bool
    """True when every replica must hold the records (it answers queries itself)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def replace(self, owner: str, records: RecordSet) -> None:
        """Make `records` exactly what `owner` has, with no moment where a kept name has none.
        An empty set removes the owner's records; removing what is absent succeeds."""

    async def resync(self, desired: dict[str, RecordSet]) -> int:
        """Repair drift against a full listing; returns how many records were changed."""
