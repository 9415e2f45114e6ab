"""Verification keys: from PEM / JWK-set files (reloaded when they change) and from a JWKS URL.

A `KeySet` is an immutable snapshot; `KeyStore` owns the current one, swaps it atomically
when a source changes and tells its listeners (the review cache) so that nothing verified
with a removed key outlives the removal. Every key is tagged with its algorithm family, and a
token's `alg` only ever meets keys of that family: an HS256 token is never checked against an
RSA public key, whatever the bytes look like.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp
import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from webhook.errors import KeysUnavailable
from webhook.filestamp import Stamp, file_stamp

log = logging.getLogger(__name__)

Family = Literal["HMAC", "RSA", "EC-P256", "Ed25519"]
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
ALG_FAMILY: dict[str, Family] = {"HS256": "HMAC", "RS256": "RSA", "ES256": "EC-P256", "EdDSA": "Ed25519"}
MIN_RSA_BITS = 2048
MIN_HMAC_BYTES = 32
MAX_JWKS_BYTES = 1 << 20


class KeyLoadError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class VerificationKey:
    family: Family
    key: bytes | PublicKey
    kid: str | None
    """The JWK kid; for PEM files the RFC 7638 thumbprint (what `mint` puts in tokens)."""
    source: str
    any_kid: bool = False
    """Also tried for tokens naming another kid (PEM files, HMAC secrets, JWKs without kid)."""


@dataclass(frozen=True, slots=True)
class KeySet:
    keys: tuple[VerificationKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keys)

    def has_kid(self, kid: str) -> bool:
        return any(k.kid == kid for k in self.keys)

    def candidates(self, alg: str, kid: str | None) -> list[VerificationKey]:
        family = ALG_FAMILY.get(alg)
        return [k for k in self.keys if k.family == family and (kid is None or k.kid is None or k.kid == kid)]


def family_of(key: object) -> Family:
    """The algorithm family a key may verify; refuses key types and sizes we do not allow."""
    if isinstance(key, bytes):
        if len(key) < MIN_HMAC_BYTES:
            raise KeyLoadError(f"HMAC secret shorter than {MIN_HMAC_BYTES} bytes")
        return "HMAC"
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise KeyLoadError(f"RSA key of {key.key_size} bits (< {MIN_RSA_BITS})")
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise KeyLoadError(f"EC curve {key.curve.name} (only P-256 for ES256)")
        return "EC-P256"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519"
    raise KeyLoadError(f"unsupported key type {type(key).__name__}")


def _b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8 or 1, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def public_jwk(key: PublicKey) -> dict[str, str]:
    """The public JWK members RFC 7638 hashes, for PEM keys and the dev `mint` command."""
    if isinstance(key, rsa.RSAPublicKey):
        nums = key.public_numbers()
        return {"e": _b64(nums.e), "kty": "RSA", "n": _b64(nums.n)}
    if isinstance(key, ec.EllipticCurvePublicKey):
        pn = key.public_numbers()
        size = (key.curve.key_size + 7) // 8

        def coord(v: int) -> str:
            return base64.urlsafe_b64encode(v.to_bytes(size, "big")).rstrip(b"=").decode()

        return {"crv": "P-256", "kty": "EC", "x": coord(pn.x), "y": coord(pn.y)}
    raw = key.public_bytes_raw()
    return {"crv": "Ed25519", "kty": "OKP", "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode()}


def thumbprint(key: PublicKey) -> str:
    """RFC 7638 JWK thumbprint (SHA-256, base64url): the kid `mint` puts on dev tokens."""
    canonical = json.dumps(public_jwk(key), separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def parse_jwks(doc: Any, source: str) -> list[VerificationKey]:
    """Keys of a JWK set (or a single JWK); unusable keys are skipped with a warning."""
    if isinstance(doc, dict) and "keys" not in doc and "kty" in doc:
        doc = {"keys": [doc]}
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise KeyLoadError(f"{source}: not a JWK set")
    out = []
    for i, jwk in enumerate(doc["keys"]):
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        try:
            parsed = jwt.PyJWK(jwk).key
            kid = _kid(jwk.get("kid"))
            out.append(VerificationKey(family_of(parsed), parsed, kid, source, any_kid=kid is None))
        except (jwt.PyJWKError, jwt.InvalidKeyError, KeyLoadError, ValueError, TypeError) as e:
            log.warning("skipping key %d of %s: %s", i, source, e)
    return out


def _kid(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----", re.S)


def parse_pem(data: bytes, source: str) -> list[VerificationKey]:
    """Public keys and certificates in a PEM file (private keys are refused: wrong file)."""
    out = []
    for m in _PEM_BLOCK.finditer(data):
        label, block = m.group(1), m.group(0)
        if label == b"CERTIFICATE":
            key: Any = x509.load_pem_x509_certificate(block).public_key()
        elif label == b"PUBLIC KEY" or label == b"RSA PUBLIC KEY":
            key = load_pem_public_key(block)
        else:
            raise KeyLoadError(f"{source}: PEM block {label.decode()} is not a public key or certificate")
        out.append(VerificationKey(family_of(key), key, thumbprint(key), source, any_kid=True))
    if not out:
        raise KeyLoadError(f"{source}: no PEM public key found")
    return out


def parse_key_file(data: bytes, source: str) -> list[VerificationKey]:
    if data.lstrip().startswith(b"{"):
        try:
            return parse_jwks(json.loads(data), source)
        except ValueError as e:
            raise KeyLoadError(f"{source}: {e}") from e
    return parse_pem(data, source)


def parse_hmac_secret(data: bytes, source: str) -> VerificationKey:
    secret = data.strip()
    if secret.startswith((b"-----BEGIN", b"ssh-", b"{")):
        raise KeyLoadError(f"{source}: looks like a public key, not an HMAC shared secret")
    return VerificationKey(family_of(secret), secret, None, source, any_kid=True)


class FileKeys:
    """Keys from files; `reload_if_changed` re-reads them when any file's stat changes."""

    def __init__(self, key_files: Sequence[Path], hmac_files: Sequence[Path] = ()) -> None:
        self._files = [(p, False) for p in key_files] + [(p, True) for p in hmac_files]
        self._stamp: Stamp | None = None
        self.keys: tuple[VerificationKey, ...] = ()
        self.loaded_at: float | None = None

    def reload_if_changed(self) -> bool:
        stamp = file_stamp(p for p, _ in self._files)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            keys: list[VerificationKey] = []
            for path, is_hmac in self._files:
                data = path.read_bytes()
                keys += [parse_hmac_secret(data, str(path))] if is_hmac else parse_key_file(data, str(path))
        except (OSError, ValueError) as e:
            log.error("key files not reloaded, keeping %d last-good keys: %s", len(self.keys), e)
            return False
        changed = keys != list(self.keys)
        self.keys, self.loaded_at = tuple(keys), time.time()
        log.info("loaded %d keys from %d files", len(keys), len(self._files))
        return changed


_MAX_AGE = re.compile(r"(?:^|,)\s*(?:s-)?max-age\s*=\s*\"?(\d+)", re.I)


def max_age(cache_control: str | None) -> float | None:
    if not cache_control:
        return None
    if re.search(r"no-cache|no-store", cache_control, re.I):
        return 0.0
    m = _MAX_AGE.search(cache_control)
    return float(m.group(1)) if m else None


class JwksKeys:
    """Keys fetched from a JWKS URL; a failed fetch keeps the last good keys."""

    def __init__(self, url: str, *, session: aiohttp.ClientSession, timeout: float = 5.0) -> None:
        self.url, self._session, self._timeout = url, session, timeout
        self.keys: tuple[VerificationKey, ...] = ()
        self.loaded_at: float | None = None
        self.healthy = False
        self.fetches = 0

    async def fetch(self) -> float | None:
        """Fetch once; return the Cache-Control max-age, or raise KeyLoadError keeping old keys."""
        self.fetches += 1
        try:
            async with self._session.get(
                self.url, timeout=aiohttp.ClientTimeout(total=self._timeout)
            ) as resp:
                if resp.status != 200:
                    raise KeyLoadError(f"JWKS {self.url} answered {resp.status}")
                body = await resp.content.read(MAX_JWKS_BYTES + 1)
                if len(body) > MAX_JWKS_BYTES:
                    raise KeyLoadError(f"JWKS {self.url} larger than {MAX_JWKS_BYTES} bytes")
                keys = parse_jwks(json.loads(body), self.url)
                ttl = max_age(resp.headers.get("Cache-Control"))
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as e:
            self.healthy = False
            raise KeyLoadError(f"JWKS {self.url} unreachable: {type(e).__name__}: {e}") from e
        if not keys:
            self.healthy = False
            raise KeyLoadError(f"JWKS {self.url} holds no usable key")
        self.keys, self.loaded_at, self.healthy = tuple(keys), time.time(), True
        return ttl


@dataclass(frozen=True, slots=True, kw_only=True)
class RefreshPolicy:
    default_refresh: float = 300.0
    """JWKS refresh period when the issuer sends no Cache-Control max-age."""
    min_refresh: float = 10.0
    max_refresh: float = 3600.0
    unknown_kid_refetch: float = 30.0
    """At most one refetch per this many seconds because of a token with an unknown kid."""
    file_poll: float = 2.0
    retry_after: int = 5


class KeyStore:
    """The current KeySet, kept fresh by a background task; notifies listeners on change."""

    def __init__(
        self,
        files: FileKeys | None,
        jwks: JwksKeys | None,
        policy: RefreshPolicy = RefreshPolicy(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._files, self._jwks, self._policy, self._clock = files, jwks, policy, clock
        self.keyset = KeySet()
        self._listeners: list[Callable[[], None]] = []
        self._lock = asyncio.Lock()
        self._attempts = 0
        self.jwks_failures = 0
        """JWKS fetches that failed (iam_webhook_jwks_refresh_failures_total)."""
        self._last_kid_refetch = float("-inf")
        self._next_refresh = float("-inf")
        self._tasks: list[asyncio.Task[None]] = []

    def on_change(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def age(self) -> float:
        """Seconds since the oldest source last loaded successfully (inf: never)."""
        stamps = [s.loaded_at for s in self._sources()]
        return float("inf") if not stamps or None in stamps else time.time() - min(s for s in stamps if s)

    def _sources(self) -> Iterable[FileKeys | JwksKeys]:
        return [s for s in (self._files, self._jwks) if s is not None]

    def _publish(self) -> None:
        keys = tuple(k for s in self._sources() for k in s.keys)
        if keys != self.keyset.keys:
            self.keyset = KeySet(keys)
            for fn in self._listeners:
                fn()

    async def start(self) -> None:
        """Load what can be loaded now (an unreachable issuer is not fatal) and start refreshing."""
        if self._files is not None:
            self._files.reload_if_changed()
            self._tasks.append(asyncio.create_task(self._poll_files()))
        if self._jwks is not None:
            await self._fetch_jwks()
            self._tasks.append(asyncio.create_task(self._refresh_jwks()))
        self._publish()

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _poll_files(self) -> None:
        assert self._files is not None
        while True:
            await asyncio.sleep(self._policy.file_poll)
            if self._files.reload_if_changed():
                self._publish()

    async def _fetch_jwks(self) -> bool:
        assert self._jwks is not None
        p = self._policy
        self._attempts += 1
        try:
            ttl = await self._jwks.fetch()
        except KeyLoadError as e:
            self.jwks_failures += 1
            log.warning("%s; keeping %d last-good keys", e, len(self._jwks.keys))
            self._next_refresh = self._clock() + p.retry_after
            return False
        ttl = p.default_refresh if ttl is None else ttl
        self._next_refresh = self._clock() + min(max(ttl, p.min_refresh), p.max_refresh)
        self._publish()
        return True

    async def _refresh_jwks(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, self._next_refresh - self._clock()))
            if self._clock() >= self._next_refresh:
                async with self._lock:
                    await self._fetch_jwks()

    async def refetch_for_unknown_kid(self) -> None:
        """A token named a kid we do not have: refetch the JWKS, at most once per interval.

        Only refetches caused by unknown kids count against the interval (scheduled refreshes
        do not), and concurrent callers share one fetch. Returns when the caller may look
        again; raises KeysUnavailable when the issuer cannot be reached, since then nobody
        can tell whether the kid is real.
        """
        if self._jwks is None:
            return
        before = self._attempts
        async with self._lock:
            refetched_meanwhile = self._attempts != before
            too_soon = self._clock() - self._last_kid_refetch < self._policy.unknown_kid_refetch
            if refetched_meanwhile or too_soon:
                ok = self._jwks.healthy
            else:
                self._last_kid_refetch = self._clock()
                ok = await self._fetch_jwks()
        if not ok:
            raise KeysUnavailable(
                "issuer unreachable; cannot check the signing key", self._policy.retry_after
            )
