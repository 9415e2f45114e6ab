"""The suite's development PKIs pass OpenSSL's strict X.509 checks (Python 3.13's default,
VERIFY_X509_STRICT: a CA needs a SubjectKeyIdentifier, a leaf an AuthorityKeyIdentifier), checked by
a real mutual-TLS handshake over a socketpair with the flag set explicitly, so on 3.11 too."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from nodeenv.ovn_pki import OvnPki
from webhook.devcerts import issue_ca, issue_leaf, write_pair


def _strict(purpose: ssl.Purpose, ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(purpose, cafile=str(ca))
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(cert, key)
    return ctx


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> tuple[str, str]:
    """Both ends' view of the peer's CN after a handshake (the server's error, if any, re-raised)."""
    a, b = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with server.wrap_socket(a, server_side=True) as tls:
                seen["client"] = dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError) as e:
            seen["error"] = e

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(b, server_hostname=hostname) as tls:
            server_cn = dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]
            assert tls.recv(2) == b"ok"
    finally:
        b.close()
        thread.join(timeout=10)
    if "error" in seen:
        raise AssertionError(f"server side: {seen['error']}")
    return str(seen["client"]), server_cn


def test_webhook_dev_pki_passes_strict_verification(tmp_path: Path) -> None:
    ca = issue_ca()
    ca_crt, _ = write_pair(tmp_path, "ca", *ca)
    srv = write_pair(
        tmp_path, "server", *issue_leaf(ca, "localhost", server_names=("localhost", "127.0.0.1"))
    )
    cli = write_pair(tmp_path, "client", *issue_leaf(ca, "k8s-apiserver", client=True))
    server = _strict(ssl.Purpose.CLIENT_AUTH, ca_crt, *srv)
    client = _strict(ssl.Purpose.SERVER_AUTH, ca_crt, *cli)
    assert _handshake(server, client, "localhost") == ("k8s-apiserver", "localhost")


def test_ovn_pki_passes_strict_verification(tmp_path: Path) -> None:
    pki = OvnPki(tmp_path / "pki")
    central, controller = pki.issue("ovn-central", ["127.0.0.1"]), pki.issue("ovn-controller-node1")
    server = _strict(ssl.Purpose.CLIENT_AUTH, pki.ca_cert, central.certificate, central.private_key)
    client = _strict(ssl.Purpose.SERVER_AUTH, pki.ca_cert, controller.certificate, controller.private_key)
    assert _handshake(server, client, "127.0.0.1") == ("ovn-controller-node1", "ovn-central")


def test_the_identifiers_chain_leaf_to_ca() -> None:
    ca = issue_ca()
    leaf, _ = issue_leaf(ca, "x", server_names=("x",))
    ca_ski = ca[0].extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    assert leaf.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    constraints = ca[0].extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    assert ca[0].extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign


def test_a_chain_without_identifiers_is_refused_under_strict(tmp_path: Path) -> None:
    """The flag is really in force: the same handshake fails for a leaf without an AKI."""
    ca = issue_ca()
    ca_crt, _ = write_pair(tmp_path, "ca", *ca)
    cert, key = issue_leaf(ca, "localhost", server_names=("localhost",))
    bare = x509.CertificateBuilder(
        issuer_name=cert.issuer,
        subject_name=cert.subject,
        public_key=cert.public_key(),
        serial_number=cert.serial_number,
        not_valid_before=cert.not_valid_before_utc,
        not_valid_after=cert.not_valid_after_utc,
        extensions=[e for e in cert.extensions if not isinstance(e.value, x509.AuthorityKeyIdentifier)],
    ).sign(ca[1], cert.signature_hash_algorithm)  # type: ignore[arg-type]
    srv = write_pair(tmp_path, "server", bare, key)
    cli = write_pair(tmp_path, "client", *issue_leaf(ca, "c", client=True))
    server = _strict(ssl.Purpose.CLIENT_AUTH, ca_crt, *srv)
    client = _strict(ssl.Purpose.SERVER_AUTH, ca_crt, *cli)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, client, "localhost")
