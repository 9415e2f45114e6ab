"""What the PlasmaCloud service doubles (LightningStor here, FiberLB/FlashDNS/PrismNET in the tests)
demand of a caller, as the real services do: TLS only, and a valid IAM token on every call.

`server_credentials` serves TLS with the dev serving certificate; `IamTokenCheck` is a gRPC server
interceptor that answers UNAUTHENTICATED before the servicer runs when the `authorization` metadata
holds no Bearer token, or one that is malformed, wrongly signed, expired, not yet valid, from another
issuer or not for `audience`. The JWT checks are the IAM webhook's own (webhook/tokens.py, keys from
webhook/keys.py, re-read when the key file changes); the reason goes back to the caller, never the
token. A token verified once is remembered (bounded, until its `exp`, forgotten when the key file
changes), as a real service caches its validations: every call is still checked against it.

`ensure_dev_pki` makes, once per environment directory, the DEVELOPMENT CA, the services' serving
certificate, the dev IAM signing key pair and a token for the platform's components (0600), from the
webhook's dev PKI code (webhook/devcerts.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from common.plasmacloud_grpc import PlasmaCloudAuth
from webhook.devcerts import issue_ca, issue_leaf, mint, new_key, private_pem, public_pem, write_pair
from webhook.errors import TokenRejected
from webhook.keys import FileKeys, KeySet
from webhook.settings import MintSettings
from webhook.tokens import TokenPolicy, TokenValidator

log = logging.getLogger(__name__)
DEV_ISSUER = "https://iam.dev.k8shost.local"
AUDIENCE = "plasmacloud"
"""The audience PlasmaCloud's services accept (the IAM token's `aud`, a projected token's audience)."""
SERVICE_NAMES = (
    "localhost", "127.0.0.1",
    "lightningstor.plasmacloud.internal", "fiberlb.plasmacloud.internal",
    "flashdns.plasmacloud.internal", "prismnet.plasmacloud.internal",
)  # fmt: skip
PLATFORM_SUBJECT = "k8shost-platform"
CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRules:
    key_file: Path
    """The IAM signing public key(s) (PEM or JWK set)."""
    issuer: str = DEV_ISSUER
    audience: str = AUDIENCE


class IamTokenCheck(grpc.ServerInterceptor):
    """UNAUTHENTICATED for a call without a valid IAM token (see the module doc)."""

    def __init__(self, rules: TokenRules, clock: Callable[[], float] = time.time) -> None:
        self.rules, self._clock = rules, clock
        self._keys = FileKeys([rules.key_file])
        self._keyset = KeySet()
        self._lock = threading.Lock()
        self._validator = TokenValidator(TokenPolicy(issuers=(rules.issuer,)), clock)
        self._verified: dict[str, tuple[float, tuple[str, ...]]] = {}
        """token -> (exp, audiences) of tokens verified with the current keys."""
        self.refused: list[str] = []
        """Reasons of the refusals so far (what a test or the sandbox shows)."""

    def reason(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> str:
        """Why the call is refused ("" when its token is good)."""
        auth = [v for k, v in metadata or () if k == "authorization"]
        if len(auth) != 1 or not isinstance(auth[0], str) or not auth[0].startswith("Bearer "):
            return "missing IAM token (authorization: Bearer)"
        token = auth[0][7:].strip()
        with self._lock:
            if self._keys.reload_if_changed() or not self._keyset:
                self._keyset, self._verified = KeySet(self._keys.keys), {}
            keys, known = self._keyset, self._verified.get(token)
        if known is None:
            try:
                verified = self._validator.validate(token, keys)
            except TokenRejected as e:
                return f"IAM token rejected: {e}"
            known = (verified.expires_at, verified.audiences)
            with self._lock:
                if len(self._verified) >= CACHE_SIZE:
                    self._verified.clear()
                if self._keyset is keys:  # not verified with keys replaced meanwhile
                    self._verified[token] = known
        if known[0] <= self._clock() - self._validator.policy.leeway:
            return "IAM token rejected: token expired"
        if self.rules.audience not in known[1]:
            return f"IAM token rejected: not for audience {self.rules.audience}"
        return ""

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        why = self.reason(details.invocation_metadata)
        if not why or handler is None:
            return handler
        self.refused.append(why)
        log.warning("%s refused: %s", details.method, why)
        return _refusal(handler, why)


def _refusal(handler: Any, why: str) -> Any:
    def abort(request: object, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, why)

    if handler.request_streaming or handler.response_streaming:
        make = {
            (True, True): grpc.stream_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
        }[(handler.request_streaming, handler.response_streaming)]
    else:
        make = grpc.unary_unary_rpc_method_handler
    return make(
        abort,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


@dataclass(frozen=True, slots=True)
class DevPki:
    """Paths of one environment's DEVELOPMENT PlasmaCloud credentials (see ensure_dev_pki)."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def server_cert(self) -> Path:
        return self.dir / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.dir / "server.key"

    @property
    def signing_key(self) -> Path:
        return self.dir / "iam-signing.key"

    @property
    def signing_pub(self) -> Path:
        return self.dir / "iam-signing.pub"

    @property
    def token(self) -> Path:
        return self.dir / "token"

    def rules(self) -> TokenRules:
        return TokenRules(key_file=self.signing_pub)

    def server_credentials(self) -> grpc.ServerCredentials:
        return server_credentials(self.server_cert, self.server_key)

    def client_env(self) -> dict[str, str]:
        """The variables a PlasmaCloud client reads (common/plasmacloud_grpc.py)."""
        return {"PLASMACLOUD_CA": str(self.ca), "PLASMACLOUD_TOKEN_FILE": str(self.token)}

    def client_flags(self) -> list[str]:
        return ["--plasmacloud-ca", str(self.ca), "--plasmacloud-token-file", str(self.token)]

    def client_auth(self, token_file: Path | None = None) -> PlasmaCloudAuth:
        return PlasmaCloudAuth(ca=self.ca, token_file=token_file or self.token)

    def server(self, workers: int = 4) -> tuple[grpc.Server, IamTokenCheck]:
        """A gRPC server checking every call's IAM token; add its ports with `add_port`."""
        check = IamTokenCheck(self.rules())
        return grpc.server(ThreadPoolExecutor(max_workers=workers), interceptors=[check]), check

    def add_port(self, server: grpc.Server, address: str) -> int:
        """TLS only: `address` is host:port (port 0: a free one, returned) or unix:/path."""
        port: int = server.add_secure_port(address, self.server_credentials())
        return port

    def mint(self, *, ttl: int = 86400, audience: str = AUDIENCE, sub: str = PLATFORM_SUBJECT,
             key: Path | None = None, issuer: str = DEV_ISSUER) -> str:  # fmt: skip
        """DEVELOPMENT ONLY: a token from the dev IAM key (or `key`); negative `ttl`: expired."""
        s = MintSettings(key=key or self.signing_key, alg=None, issuer=issuer, audiences=(audience,),
                         sub=sub, ttl=ttl)  # fmt: skip
        return mint(s)


def ensure_dev_pki(out: Path, server_names: Sequence[str] = (), token_ttl: int = 7 * 86400) -> DevPki:
    """DEVELOPMENT ONLY: make `out`'s CA, serving certificate (SERVICE_NAMES + `server_names`),
    IAM signing key pair and platform token, unless a previous call made them."""
    pki = DevPki(out)
    if pki.token.exists():
        return pki
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    ca = issue_ca(cn="PlasmaCloud dev CA")
    write_pair(out, "ca", *ca)
    (out / "ca.key").unlink()  # nothing else is ever signed by it
    names = tuple(dict.fromkeys((*SERVICE_NAMES, *server_names)))
    write_pair(out, "server", *issue_leaf(ca, "plasmacloud-services", server_names=names))
    signing = new_key("ES256")
    _write_0600(pki.signing_key, private_pem(signing))
    pki.signing_pub.write_bytes(public_pem(signing))
    _write_0600(pki.token, pki.mint(ttl=token_ttl).encode())
    return pki


def _write_0600(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)


def server_credentials(cert: Path, key: Path) -> grpc.ServerCredentials:
    """TLS with this certificate; clients are authenticated by their IAM token, not a certificate."""
    return grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
