"""The decision: TokenReview in, TokenReviewStatus out. No I/O, no aiohttp.

`Reviewer.review` looks in the cache, else validates the token against the current key set and
maps its claims, then applies the audience rule: with `spec.audiences` the token's audiences
must intersect them and the intersection is returned in `status.audiences`; without, the
token must carry one of the configured audiences (the webhook's implicit audience).
"""

from __future__ import annotations

from collections.abc import Callable

from webhook.cache import CachedIdentity, ReviewCache
from webhook.errors import KeysUnavailable, TokenRejected, UnknownSigningKey
from webhook.keys import KeySet
from webhook.mapping import ClaimMapper
from webhook.tokens import TokenValidator
from webhook.wire import TokenReview, TokenReviewStatus


class Reviewer:
    def __init__(
        self,
        validator: TokenValidator,
        mapper: ClaimMapper,
        keys: Callable[[], KeySet],
        audiences: tuple[str, ...],
        cache: ReviewCache | None = None,
    ) -> None:
        if not audiences:
            raise ValueError("at least one accepted audience is required")
        self.validator, self.mapper, self._keys = validator, mapper, keys
        self.audiences, self.cache = audiences, cache
        self.last_cache_hit = False

    def review(self, req: TokenReview) -> TokenReviewStatus:
        """Decide about `req`.

        Raises UnknownSigningKey (the caller may refetch keys and call again) and
        KeysUnavailable (no keys at all: nobody can decide). Every other rejection is a status.
        """
        try:
            identity = self._identity(req.token)
        except UnknownSigningKey:
            raise
        except TokenRejected as e:
            return TokenReviewStatus.rejected(e.reason)
        wanted = req.audiences or self.audiences
        common = tuple(a for a in identity.audiences if a in wanted)
        if not common:
            return TokenReviewStatus.rejected("token audience not accepted")
        return TokenReviewStatus(
            authenticated=True, user=identity.user, audiences=common if req.audiences else ()
        )

    def _identity(self, token: str) -> CachedIdentity:
        key = ReviewCache.key(token) if self.cache is not None else b""
        if self.cache is not None:
            hit = self.cache.get(key)
            self.last_cache_hit = hit is not None
            if hit is not None:
                return hit
        keys = self._keys()
        if not keys:
            raise KeysUnavailable("no verification keys loaded")
        verified = self.validator.validate(token, keys)
        identity = CachedIdentity(self.mapper.map(verified.claims), verified.audiences)
        if self.cache is not None:
            self.cache.put(key, identity, verified.expires_at)
        return identity
