"""The cluster's OVN PKI: one CA, and a key and certificate per server and per client identity.

Made once per cluster, as kubeadm makes its PKI (`/etc/kubernetes/pki`): `ca.key`/`ca.crt`, then
`<name>.key`/`<name>.crt` per identity, the certificate's CN being `name` (`ovsdb-server-nb1`,
`ovn-controller-node2`, `prismnet-agent-node1`, ...). ECDSA P-256 keys (the cheapest TLS
handshake OVS and python's ssl both take), written 0600 with O_EXCL: a key file is never reused
from someone else or widened. `renew` replaces one identity's key and certificate by rename, as
cert-manager renews a Secret: the programs using it load the new files on their next connection.

`python -m nodeenv.ovn_pki DIR NAME...` makes the CA (if new) and the named identities: the files
the manifests' Secrets carry (docs/install-k3s.md).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ovnaccess.tls import OvnTls

CA = "ca"
MANIFEST_IDENTITIES = ("ovn-central", "ovn-northd", "ovn-controller", "prismnet-agent",
                       "fiberlb-controller", "netpol-controller", "node-controller")  # fmt: skip
"""The identities the manifests mount, each from Secret `ovn-tls-<identity>` (tls.key, tls.crt,
ca.crt): the central's members share one server certificate, a DaemonSet's pods one per component."""


def secret_name(identity: str) -> str:
    return f"ovn-tls-{identity}"


VALIDITY = datetime.timedelta(days=365)
CA_VALIDITY = datetime.timedelta(days=3650)


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """`key` as PEM in a new file `path`, 0600 from its creation (FileExistsError if it exists)."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "k8shost OVN"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])  # fmt: skip


class OvnPki:
    """The PKI in `directory` (0700): see the module doc."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    @property
    def ca_cert(self) -> Path:
        return self.dir / f"{CA}.crt"

    def files(self, name: str) -> OvnTls:
        return OvnTls(private_key=self.dir / f"{name}.key", certificate=self.dir / f"{name}.crt",
                      ca_cert=self.ca_cert)  # fmt: skip

    def ensure_ca(self, cn: str = "k8shost OVN CA") -> None:
        """The CA's key and self-signed certificate, made if absent."""
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if self.ca_cert.exists():
            return
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )  # fmt: skip
        write_key(self.dir / f"{CA}.key", key)
        _write_atomically(self.ca_cert, cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, addresses: Iterable[str] = ()) -> OvnTls:
        """`name`'s key and certificate (CN `name`, SANs `addresses`: IPs or DNS names), made if
        absent (an existing pair is kept: once per cluster); the CA made first if new."""
        self.ensure_ca()
        out = self.files(name)
        if not out.certificate.exists():
            self._sign(name, list(addresses), out.private_key, out.certificate)
        return out

    def renew(self, name: str, addresses: Iterable[str] = ()) -> OvnTls:
        """A new key and certificate for `name`, each put in place by rename (no reader sees a
        half-written file). The certificate first: OVS's stream-ssl checks the key's mtime and
        only then the certificate's, so a check between the two renames must see the key as
        unchanged (it would otherwise record the new key alone and never load the pair)."""
        out = self.files(name)
        key_tmp, cert_tmp = out.private_key.with_suffix(".key.new"), out.certificate.with_suffix(".crt.new")
        key_tmp.unlink(missing_ok=True)
        self._sign(name, list(addresses), key_tmp, cert_tmp)
        os.replace(cert_tmp, out.certificate)
        os.replace(key_tmp, out.private_key)
        return out

    def _sign(self, name: str, addresses: list[str], key_path: Path, cert_path: Path) -> None:
        ca_key = serialization.load_pem_private_key((self.dir / f"{CA}.key").read_bytes(), None)
        ca = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{self.dir / CA}.key is not an EC key")
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)
        )  # fmt: skip
        if addresses:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(a) for a in addresses]), False)
        cert = builder.sign(ca_key, hashes.SHA256())
        write_key(key_path, key)
        _write_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM))


def client_tls(endpoints: Mapping[str, str], program: str, node: str) -> OvnTls | None:
    """`program`'s own identity on `node` (CN `<program>-<node>`) from the cluster's PKI named by
    `OVN_PKI_DIR` in a node's endpoints; None where OVN is reached over unix sockets only."""
    directory = endpoints.get("OVN_PKI_DIR")
    return OvnPki(Path(directory)).issue(f"{program}-{node}") if directory else None


def tls_env(endpoints: Mapping[str, str], program: str, node: str) -> dict[str, str]:
    """The OVN_SSL_* variables of `program`'s identity on `node` ({} without a PKI)."""
    tls = client_tls(endpoints, program, node)
    return tls.env() if tls else {}


def manifest_pki(directory: Path, servers: Iterable[str]) -> OvnPki:
    """The PKI the manifests' Secrets are made from: every MANIFEST_IDENTITIES' key and
    certificate (ovn-central's with the servers' addresses as SANs), made if absent."""
    pki = OvnPki(directory)
    for identity in MANIFEST_IDENTITIES:
        pki.issue(identity, list(servers) if identity == "ovn-central" else [])
    return pki


def secret_args(pki: OvnPki, identity: str) -> list[str]:
    """`kubectl` arguments creating Secret ovn-tls-<identity> (tls.key, tls.crt, ca.crt)."""
    f = pki.files(identity)
    return ["create", "secret", "generic", secret_name(identity), f"--from-file=tls.key={f.private_key}",
            f"--from-file=tls.crt={f.certificate}", f"--from-file=ca.crt={f.ca_cert}"]  # fmt: skip


def _san(address: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(address))
    except ValueError:
        return x509.DNSName(address)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m nodeenv.ovn_pki",
        description="Make the cluster's OVN CA (if new) and a key and certificate per identity, "
        "CN = the identity's name (existing files are kept).",
    )
    p.add_argument("directory", type=Path, help="the PKI directory (made 0700)")
    p.add_argument("names", nargs="*", help="identities, e.g. ovn-central prismnet-agent ovn-controller")
    p.add_argument("--address", action="append", default=[], help="a SAN (IP or DNS name) for every name")
    a = p.parse_args(argv)
    pki = OvnPki(a.directory)
    pki.ensure_ca()
    for name in a.names:
        pki.issue(name, a.address)
    print(f"{pki.ca_cert} and {len(a.names)} identities in {a.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
