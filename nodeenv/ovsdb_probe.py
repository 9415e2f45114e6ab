"""Does an OVSDB server answer this client? A raw `list_dbs` (RFC 7047 JSON-RPC), in plaintext or
over TLS with or without a client certificate, from any network namespace: what a tenant pod or a
node would try, without OVS's own client tools (which refuse to start an `ssl:` connection without
a certificate, so they could not show that the *server* refuses one).
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from nodeenv.netns_socket import connected_socket
from ovnaccess.tls import OvnTls


@dataclass(frozen=True, slots=True)
class Answer:
    databases: tuple[str, ...]
    """What the server listed (empty when it refused)."""
    error: str = ""
    """How it refused ("" when it answered)."""
    server_serial: int = 0
    """The serial number of the certificate the server presented (0: plaintext or none)."""

    @property
    def refused(self) -> bool:
        return not self.databases


def client_context(ca: Path, identity: OvnTls | None) -> ssl.SSLContext:
    """TLS as OVS clients do it: the server checked against `ca` (no host name check), and
    `identity`'s certificate presented (None: none)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(ca)
    if identity is not None:
        ctx.load_cert_chain(identity.certificate, identity.private_key)
    return ctx


def list_dbs(host: str, port: int, ctx: ssl.SSLContext | None, netns: str = "", timeout: float = 5) -> Answer:
    """`list_dbs` to host:port from `netns` ("" = this namespace), over TLS when `ctx`."""
    try:
        if netns:
            raw = connected_socket(netns, host, port, timeout)
        else:
            raw = socket.create_connection((host, port), timeout=timeout)
        with raw, ctx.wrap_socket(raw) if ctx else raw as sock:
            sock.sendall(json.dumps({"method": "list_dbs", "params": [], "id": 1}).encode())
            reply = sock.recv(65536)
            der = sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None
        if not reply:
            return Answer((), "the server closed the connection without answering")
        serial = x509.load_der_x509_certificate(der).serial_number if der else 0
        return Answer(tuple(json.loads(reply)["result"]), server_serial=serial)
    except (OSError, ValueError, KeyError) as e:
        return Answer((), f"{type(e).__name__}: {e}")
