"""The one place that knows how a PlasmaCloud gRPC client authenticates (LightningStor, FiberLB,
FlashDNS, PrismNET): TLS against a pinned CA, and an IAM token on every call.

Channel credentials pin the CA bundle (`ca`); a client certificate is optional (`client_cert`,
`client_key`). Call credentials read the token file (a mounted IAM token Secret or a projected
ServiceAccount token) and send `authorization: Bearer <token>`; the file is re-read when its
inode, mtime or size changes (kubelet swaps a symlink when it renews a projected token), so a
rotated token is picked up without restarting anything. The token is never logged.

Every component's settings carry one `PlasmaCloudAuth`, built from the same flags and
environment variables (`add_flags` / `from_args`), so the four clients are configured alike.
"""

from __future__ import annotations

import argparse
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import grpc
import grpc.aio

from webhook.filestamp import Stamp, file_stamp

log = logging.getLogger(__name__)
MAX_TOKEN_BYTES = 16384
ENV = {
    "ca": "PLASMACLOUD_CA",
    "token_file": "PLASMACLOUD_TOKEN_FILE",
    "client_cert": "PLASMACLOUD_CLIENT_CERT",
    "client_key": "PLASMACLOUD_CLIENT_KEY",
    "server_name": "PLASMACLOUD_SERVER_NAME",
}
HELP = {
    "ca": "CA bundle (PEM) the PlasmaCloud gRPC services' certificates must chain to",
    "token_file": "IAM token file sent as a Bearer token on every call (re-read when it changes)",
    "client_cert": "optional client certificate (PEM) for the PlasmaCloud gRPC services",
    "client_key": "its key (PEM, 0600)",
    "server_name": "name to verify the service's certificate against instead of the endpoint's host",
}


class CredentialsError(ValueError):
    """The PlasmaCloud credentials are not configured or not readable."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlasmaCloudAuth:
    ca: Path
    token_file: Path
    client_cert: Path | None = None
    client_key: Path | None = None
    server_name: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self:
        ns = argparse.Namespace(**{f"plasmacloud_{k}": env.get(v) for k, v in ENV.items()})
        return cls.from_args(ns)

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Self:
        ca, token = getattr(a, "plasmacloud_ca", None), getattr(a, "plasmacloud_token_file", None)
        if not ca or not token:
            raise CredentialsError(
                "PlasmaCloud gRPC needs --plasmacloud-ca and --plasmacloud-token-file "
                f"(env {ENV['ca']}, {ENV['token_file']}): calls go over TLS with an IAM token only"
            )
        cert, key = getattr(a, "plasmacloud_client_cert", None), getattr(a, "plasmacloud_client_key", None)
        if bool(cert) != bool(key):
            raise CredentialsError("--plasmacloud-client-cert and --plasmacloud-client-key go together")
        return cls(
            ca=Path(ca),
            token_file=Path(token),
            client_cert=Path(cert) if cert else None,
            client_key=Path(key) if key else None,
            server_name=getattr(a, "plasmacloud_server_name", None) or "",
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        try:
            root = self.ca.read_bytes()
            cert = self.client_cert.read_bytes() if self.client_cert else None
            key = self.client_key.read_bytes() if self.client_key else None
        except OSError as e:
            raise CredentialsError(f"cannot read the PlasmaCloud TLS files: {e}") from e
        return grpc.composite_channel_credentials(
            grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=cert),
            grpc.metadata_call_credentials(TokenFile(self.token_file), name="plasmacloud-iam-token"),
        )

    def options(self, endpoint: str) -> list[tuple[str, str]]:
        """The name the certificate is checked against: `server_name`, else the endpoint's host (a
        unix socket has none: `localhost`, as gRPC's own authority for unix targets)."""
        name = self.server_name or ("localhost" if endpoint.startswith("unix:") else "")
        return [("grpc.ssl_target_name_override", name)] if name else []


def add_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """--plasmacloud-ca, --plasmacloud-token-file, --plasmacloud-client-cert/-key,
    --plasmacloud-server-name, each falling back to its PLASMACLOUD_* variable."""
    for field, var in ENV.items():
        flag = "--plasmacloud-" + field.replace("_", "-")
        p.add_argument(flag, default=env.get(var), help=f"{HELP[field]} (env {var})")


def secure_channel(endpoint: str, auth: PlasmaCloudAuth) -> grpc.Channel:
    """A blocking channel to `endpoint` (host:port or unix:///path) with TLS and the IAM token."""
    return grpc.secure_channel(endpoint, auth.channel_credentials(), options=auth.options(endpoint))


def secure_aio_channel(endpoint: str, auth: PlasmaCloudAuth) -> grpc.aio.Channel:
    """The asyncio flavour of `secure_channel`."""
    return grpc.aio.secure_channel(endpoint, auth.channel_credentials(), options=auth.options(endpoint))


class TokenFile(grpc.AuthMetadataPlugin):  # type: ignore[misc]
    """`authorization: Bearer <the file's content>` on each call; the file is re-read when it changes.

    A file that cannot be read fails the call before it is sent (gRPC answers UNAVAILABLE naming
    the file), as a projected token not written yet should: the caller retries."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: Stamp | None = None
        self._metadata: tuple[tuple[str, str], ...] = ()

    def current(self) -> tuple[tuple[str, str], ...]:
        stamp = file_stamp([self.path])
        with self._lock:
            if stamp != self._stamp:
                self._metadata = self._read()
                self._stamp = stamp
                log.info("IAM token read from %s", self.path)
            return self._metadata

    def _read(self) -> tuple[tuple[str, str], ...]:
        try:
            token = self.path.read_bytes()[: MAX_TOKEN_BYTES + 1].strip().decode("ascii")
        except (OSError, UnicodeDecodeError) as e:
            raise CredentialsError(f"IAM token file {self.path} unreadable: {type(e).__name__}") from None
        if not token or len(token) > MAX_TOKEN_BYTES or any(c.isspace() for c in token):
            raise CredentialsError(f"IAM token file {self.path} holds no single token")
        return (("authorization", f"Bearer {token}"),)

    def __call__(self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback) -> None:
        try:
            callback(self.current(), None)
        except CredentialsError as e:
            log.warning("%s", e)
            callback((), e)
