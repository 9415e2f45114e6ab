"""Bearer tokens the static table does not know, authenticated by a TokenReview webhook, as
kube-apiserver does with `--authentication-token-webhook-config-file`.

Follows k8s.io/apiserver/plugin/pkg/authenticator/token/webhook and .../token/cache as
kube-apiserver wires them (pkg/kubeapiserver/authenticator/config.go):

- the config file is a kubeconfig: its current context's cluster names the webhook (`server`, its
  CA in `certificate-authority[-data]`), its user the client certificate kube-apiserver presents
  (`client-certificate`, `client-key`); relative paths are relative to the file, as client-go's;
- each review is a POST of a TokenReview (`--authentication-token-webhook-version`, v1 by default
  here as in our k3s config) with `spec.token`; `status.authenticated: true` gives the user
  (username, groups; `system:authenticated` added as kube-apiserver's group adder does),
  `authenticated: false` is a 401;
- answers are cached for `--authentication-token-webhook-cache-ttl` (default 2m) keyed by a hash of
  the token, refusals as well as successes (`tokencache.New(auth, false, ttl, ttl)`): a token the
  webhook refused stays refused for the TTL; errors (webhook unreachable, 5xx, an answer that is not
  a TokenReview) are not cached, are retried a few times with backoff and end in a 401.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml  # type: ignore[import-untyped]

from nodeenv.kubeapi.auth import User

log = logging.getLogger(__name__)
AUTHENTICATED = "system:authenticated"
VERSIONS = ("v1", "v1beta1")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """A Go duration ("2m", "90s", "1m30s", "0") as seconds."""
    text = text.strip()
    if text == "0":
        return 0.0
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r} (e.g. 2m, 90s, 1m30s)")
    return sum(float(n) * _UNITS[u] for n, u in parts)


class WebhookConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """What kube-apiserver reads from the webhook kubeconfig."""

    server: str
    ssl: ssl.SSLContext

    @classmethod
    def load(cls, path: Path) -> WebhookConfig:
        try:
            doc = yaml.safe_load(path.read_text())
            ctx = _named(doc, "contexts", doc["current-context"])["context"]
            cluster = _named(doc, "clusters", ctx["cluster"])["cluster"]
            user = _named(doc, "users", ctx["user"])["user"] if ctx.get("user") else {}
            server = str(cluster["server"])
        except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
            raise WebhookConfigError(f"{path}: not a webhook kubeconfig: {e}") from None
        if not server.startswith("https://"):
            raise WebhookConfigError(f"{path}: the webhook's server must be https://, not {server!r}")
        ctx_ssl = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx_ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        here = path.parent
        if cluster.get("certificate-authority-data"):
            ctx_ssl.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        elif cluster.get("certificate-authority"):
            ctx_ssl.load_verify_locations(cafile=str(here / cluster["certificate-authority"]))
        if user.get("client-certificate-data") or user.get("client-key-data"):
            raise WebhookConfigError(f"{path}: give client-certificate/client-key as files")
        if user.get("client-certificate"):
            ctx_ssl.load_cert_chain(str(here / user["client-certificate"]), str(here / user["client-key"]))
        return cls(server, ctx_ssl)


def _named(doc: dict[str, Any], key: str, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = next(e for e in doc[key] if e["name"] == name)
    return entry


class ReviewError(Exception):
    """The webhook gave no usable answer (not cached)."""


class WebhookAuthenticator:
    """Async: runs on the server's event loop (its aiohttp session is made there on first use)."""

    def __init__(
        self,
        config: WebhookConfig,
        *,
        version: str = "v1",
        ttl: float = 120.0,
        max_entries: int = 10_000,
        timeout: float = 30.0,
        attempts: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(f"webhook version {version!r}: one of {', '.join(VERSIONS)}")
        self.config, self.api_version = config, f"authentication.k8s.io/{version}"
        self.ttl, self.max_entries, self.attempts = ttl, max_entries, attempts
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._clock = clock
        self._cache: OrderedDict[bytes, tuple[float, User | None]] = OrderedDict()
        self._session: aiohttp.ClientSession | None = None
        self.reviews = 0
        """TokenReviews sent (tests read it to see the cache work)."""

    async def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        try:
            user = await self._review(token)
        except ReviewError as e:
            log.warning("token webhook: %s", e)  # never the token
            return None
        if self.ttl > 0:
            self._cache[key] = (self._clock() + self.ttl, user)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return user

    async def _review(self, token: str) -> User | None:
        meta: dict[str, Any] = {"creationTimestamp": None}
        body = {"apiVersion": self.api_version, "kind": "TokenReview", "metadata": meta,
                "spec": {"token": token}, "status": {"user": {}}}  # fmt: skip
        delay = 0.5
        for attempt in range(1, self.attempts + 1):
            try:
                return _user(await self._post(body))
            except ReviewError:
                if attempt == self.attempts:
                    raise
            await asyncio.sleep(delay)
            delay *= 1.5
        raise AssertionError("unreachable")

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        self.reviews += 1
        try:
            async with self._session.post(self.config.server, json=body, ssl=self.config.ssl) as resp:
                if resp.status != 200 and resp.status != 201:
                    raise ReviewError(f"webhook answered HTTP {resp.status}")
                doc = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            raise ReviewError(f"webhook unusable: {type(e).__name__}: {e}") from None
        if not isinstance(doc, dict) or doc.get("kind") != "TokenReview":
            raise ReviewError("webhook's answer is not a TokenReview")
        return doc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _user(doc: dict[str, Any]) -> User | None:
    status = doc.get("status") or {}
    if status.get("authenticated") is not True:
        return None
    info = status.get("user") or {}
    name, groups = info.get("username"), info.get("groups") or []
    if not isinstance(name, str) or not name or not all(isinstance(g, str) for g in groups):
        raise ReviewError("webhook's TokenReview has no usable user")
    if AUTHENTICATED not in groups:
        groups = [*groups, AUTHENTICATED]
    return User(name, tuple(groups))
