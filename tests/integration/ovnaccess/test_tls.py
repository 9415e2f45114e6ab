"""OVN's databases over mutual TLS: a client with its certificate reads and writes; a plaintext
client, one without a certificate and one whose certificate another CA signed are refused, as is a
server another CA vouches for; renewed certificates are used by the next connection, on both
sides, with nothing restarted."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from nodeenv.ovn_pki import OvnPki
from nodeenv.ovsdb_probe import client_context, list_dbs
from ovnaccess.connection import OvsdbUnavailable, connect
from tests.integration.ovnaccess.conftest import OvsdbServer

TABLES = {"Logical_Switch": None}


def nbctl(remote: str, *args: str, flags: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["ovn-nbctl", f"--db={remote}", "--timeout=5", *(flags or []), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=15)


def peer_serial(port: int, ctx: ssl.SSLContext) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as s:
        der = s.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number


def serial(cert: Path) -> int:
    return x509.load_pem_x509_certificate(cert.read_bytes()).serial_number


@pytest.fixture
def other_pki() -> Iterator[OvnPki]:
    """A PKI of another cluster (or an attacker's): its own CA."""
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-pki2-", dir="/tmp"))
    yield OvnPki(workdir / "pki")
    shutil.rmtree(workdir, ignore_errors=True)


def test_a_client_with_its_certificate_reads_and_writes(nb_server: OvsdbServer, pki: OvnPki) -> None:
    admin = pki.issue("ovn-nbctl-test")
    assert nbctl(nb_server.ssl, "ls-add", "tls-a", flags=admin.ctl_flags()).returncode == 0
    db = connect(nb_server.ssl, "OVN_Northbound", TABLES, timeout=5)
    try:
        assert "tls-a" in {r.name for r in db.api.tables["Logical_Switch"].rows.values()}
        db.api.ls_add("tls-b").execute(check_error=True)
    finally:
        db.stop()
    assert "tls-b" in nb_server.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
    assert (
        "OVN_Northbound"
        in list_dbs("127.0.0.1", nb_server.port, client_context(pki.ca_cert, admin)).databases
    )


def test_a_plaintext_client_is_refused(nb_server: OvsdbServer) -> None:
    out = nbctl(f"tcp:127.0.0.1:{nb_server.port}", "ls-add", "plain")
    assert out.returncode != 0, out.stdout
    assert list_dbs("127.0.0.1", nb_server.port, None).refused
    assert "plain" not in nb_server.nbctl("--bare", "--columns=name", "list", "Logical_Switch")


def test_a_client_without_a_certificate_is_refused(nb_server: OvsdbServer, pki: OvnPki) -> None:
    """The server asks for a certificate and ends the handshake without one (the client trusts the
    server: only the server's check is tested)."""
    answer = list_dbs("127.0.0.1", nb_server.port, client_context(pki.ca_cert, None))
    assert answer.refused and answer.error.startswith("SSL"), answer  # refused in the handshake


def test_a_certificate_another_ca_signed_is_refused(
    nb_server: OvsdbServer, pki: OvnPki, other_pki: OvnPki
) -> None:
    stranger = other_pki.issue("prismnet-agent-node1")
    flags = [f"--private-key={stranger.private_key}", f"--certificate={stranger.certificate}",
             f"--ca-cert={pki.ca_cert}"]  # fmt: skip
    out = nbctl(nb_server.ssl, "ls-add", "stranger", flags=flags)
    assert out.returncode != 0, out.stdout
    assert list_dbs("127.0.0.1", nb_server.port, client_context(pki.ca_cert, stranger)).refused
    assert "stranger" not in nb_server.nbctl("--bare", "--columns=name", "list", "Logical_Switch")


def test_a_server_another_ca_vouches_for_is_refused_by_the_client(other_pki: OvnPki, tmp_path: Path) -> None:
    """Our python-ovs client checks the server: an impostor with a certificate from another CA
    (and which would accept any client of ours) gets no connection."""
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-nb-", dir="/tmp"))
    impostor = OvsdbServer(workdir, other_pki, "impostor")
    impostor.start()
    try:
        with pytest.raises(OvsdbUnavailable):
            connect(impostor.ssl, "OVN_Northbound", TABLES, timeout=2)
    finally:
        impostor.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_renewed_certificates_are_used_by_the_next_connection_nothing_restarted(
    nb_server: OvsdbServer, pki: OvnPki, other_pki: OvnPki
) -> None:
    """The server's and this process's client certificate renewed (new keys too): the server
    presents its new certificate on the next handshake, and our next connection reads our files
    anew (a stranger's certificate put in their place is refused, the renewed one accepted), with
    the same ovsdb-server process and python-ovs never reconfigured."""
    assert nb_server.proc is not None
    pid, client, probe = nb_server.proc.pid, pki.files("client"), pki.issue("probe")
    old_server = serial(nb_server.tls.certificate)
    assert peer_serial(nb_server.port, client_context(pki.ca_cert, probe)) == old_server
    pki.renew("ovsdb-server", ["127.0.0.1"])
    new_server = serial(nb_server.tls.certificate)
    assert peer_serial(nb_server.port, client_context(pki.ca_cert, probe)) == new_server != old_server

    stranger = other_pki.issue("client")
    shutil.copy(stranger.private_key, client.private_key)
    shutil.copy(stranger.certificate, client.certificate)
    with pytest.raises(OvsdbUnavailable):
        connect(nb_server.ssl, "OVN_Northbound", TABLES, timeout=2)
    old_client = serial(client.certificate)
    pki.renew("client")
    assert serial(client.certificate) != old_client and oct(os.stat(client.private_key).st_mode)[-3:] == "600"
    db = connect(nb_server.ssl, "OVN_Northbound", TABLES, timeout=5)
    try:
        db.api.ls_add("after-renewal").execute(check_error=True)
    finally:
        db.stop()
    assert nb_server.proc.pid == pid and nb_server.proc.poll() is None, "the server was not restarted"
    assert "after-renewal" in nb_server.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
