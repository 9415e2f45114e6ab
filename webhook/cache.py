"""A bounded TTL cache of positive reviews, keyed by a SHA-256 of the token (never the token).

Only verified identities are cached, never rejections: a token that starts to verify (a new
key was published) must not stay refused. An entry lives for `ttl` seconds or until the
token's own `exp`, whichever comes first; the KeyStore clears the cache when keys change.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from webhook.wire import UserInfo


@dataclass(frozen=True, slots=True)
class CachedIdentity:
    user: UserInfo
    audiences: tuple[str, ...]


class ReviewCache:
    def __init__(
        self,
        max_entries: int = 10000,
        ttl: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_entries, self.ttl, self._clock = max_entries, ttl, clock
        self._entries: OrderedDict[bytes, tuple[float, CachedIdentity]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(token: str) -> bytes:
        return hashlib.sha256(token.encode()).digest()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> CachedIdentity | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self.hits += 1
        return entry[1]

    def put(self, key: bytes, value: CachedIdentity, token_exp: float) -> None:
        if self.max_entries <= 0 or self.ttl <= 0:
            return
        deadline = min(self._clock() + self.ttl, token_exp)
        self._entries[key] = (deadline, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def hit_ratio(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0
