"""Server TLS: our serving certificate, and the apiserver's client certificate required and
verified against a configured CA (optionally pinned to one CN). Certificates are reloaded in
place when their files change: new connections get the new ones, open ones keep theirs.

OpenSSL copies the certificate into each new connection but shares the verify store, so
reloading the CA adds the new CA; a CA that disappears from the file stays trusted until restart.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.filestamp import file_stamp

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path


def server_context(files: TlsFiles) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(files.cert, files.key)
    ctx.load_verify_locations(cafile=files.client_ca)
    return ctx


class CertReloader:
    """Reloads the certificate, key and client CA into `ctx` when any of the files changes."""

    def __init__(self, ctx: ssl.SSLContext, files: TlsFiles) -> None:
        self.ctx, self.files = ctx, files
        self._stamp = file_stamp(self._paths())
        self.reloads = 0

    def _paths(self) -> tuple[Path, ...]:
        return (self.files.cert, self.files.key, self.files.client_ca)

    def reload_if_changed(self) -> bool:
        stamp = file_stamp(self._paths())
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            self.ctx.load_cert_chain(self.files.cert, self.files.key)
            self.ctx.load_verify_locations(cafile=self.files.client_ca)
        except (OSError, ssl.SSLError) as e:  # half-written files: tried again on the next change
            log.error("TLS files not reloaded, keeping the current ones: %s", e)
            return False
        self.reloads += 1
        log.info("reloaded TLS certificate %s and client CA %s", self.files.cert, self.files.client_ca)
        return True


def peer_common_name(peercert: dict[str, Any] | None) -> str | None:
    """The CN of a verified peer certificate as `SSLObject.getpeercert()` returns it."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
