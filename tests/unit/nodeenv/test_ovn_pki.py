"""The cluster's OVN PKI: a CA, one certificate per identity (CN = its name) that the CA verifies,
keys 0600 created exclusively, made once, renewed by rename."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nodeenv.ovn_pki import OvnPki, client_tls, main, write_key


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_an_identity_is_signed_by_the_ca_with_its_name_as_cn(tmp_path: Path) -> None:
    pki = OvnPki(tmp_path / "pki")
    files = pki.issue("prismnet-agent-node1", ["10.250.0.11"])
    c, ca = cert(files.certificate), cert(pki.ca_cert)
    assert c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "prismnet-agent-node1"
    c.verify_directly_issued_by(ca)
    san = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.250.0.11"]
    assert stat.S_IMODE((tmp_path / "pki").stat().st_mode) == 0o700
    for key in (files.private_key, tmp_path / "pki" / "ca.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    files.check()


def test_made_once_per_cluster_and_renewed_by_rename(tmp_path: Path) -> None:
    pki = OvnPki(tmp_path)
    first = pki.issue("ovn-controller-node2")
    serial, ca_serial = cert(first.certificate).serial_number, cert(pki.ca_cert).serial_number
    assert cert(pki.issue("ovn-controller-node2").certificate).serial_number == serial, "kept"
    inode = first.private_key.stat().st_ino
    pki.renew("ovn-controller-node2")
    assert cert(first.certificate).serial_number != serial
    assert first.private_key.stat().st_ino != inode, "a new key file, put in place by rename"
    assert stat.S_IMODE(first.private_key.stat().st_mode) == 0o600
    assert cert(pki.ca_cert).serial_number == ca_serial
    cert(first.certificate).verify_directly_issued_by(cert(pki.ca_cert))


def test_a_key_file_that_exists_is_never_written_through(tmp_path: Path) -> None:
    planted = tmp_path / "x.key"
    planted.write_text("someone else's")
    os.chmod(planted, 0o644)
    with pytest.raises(FileExistsError):
        write_key(planted, ec.generate_private_key(ec.SECP256R1()))
    assert planted.read_text() == "someone else's"


def test_client_tls_names_program_and_node_only_where_there_is_a_pki(tmp_path: Path) -> None:
    assert client_tls({}, "prismnet-agent", "node1") is None
    got = client_tls({"OVN_PKI_DIR": str(tmp_path)}, "prismnet-agent", "node1")
    assert got is not None and got.certificate == tmp_path / "prismnet-agent-node1.crt"


def test_the_cli_makes_the_ca_and_the_named_identities(tmp_path: Path) -> None:
    assert main([str(tmp_path), "ovn-central", "prismnet-agent"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ca.crt", "ca.key", "ovn-central.crt", "ovn-central.key", "prismnet-agent.crt", "prismnet-agent.key"
    ]  # fmt: skip
