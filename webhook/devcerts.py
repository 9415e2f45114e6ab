"""DEVELOPMENT ONLY: a throw-away PKI and signing key for the webhook, and dev tokens.

`gen-dev-pki` writes into one directory:
  ca.crt, ca.key                          the dev CA (signs both certificates below)
  server.crt, server.key                  the webhook's serving certificate (SANs: --server-name)
  apiserver-client.crt/.key               kube-apiserver's client certificate (CN k8s-apiserver)
  iam-webhook.yaml                        kubeconfig for --authentication-token-webhook-config-file
  signing.key, signing.pub                the dev token signing key pair (the webhook trusts .pub)
Never use any of it in production: PlasmaCloud IAM's PKI issues the real ones.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from common.secretfile import write_secret
from webhook.keys import thumbprint
from webhook.settings import PATH, MintSettings, PkiSettings

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def new_key(alg: str = "ES256") -> PrivateKey:
    if alg == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"no dev key for algorithm {alg}")


def alg_for(key: object) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ES256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    raise ValueError(f"unsupported signing key {type(key).__name__}")


def private_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _authority_key_id(issuer: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    """The leaf's AuthorityKeyIdentifier: the issuer's SubjectKeyIdentifier (Python 3.13's default
    VERIFY_X509_STRICT refuses a chain without Subject/Authority Key Identifiers)."""
    try:
        ski = issuer.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    except x509.ExtensionNotFound:  # a CA made before the identifiers were added
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.public_key())  # type: ignore[arg-type]


def issue_ca(cn: str = "k8shost dev CA", days: int = 365) -> tuple[x509.Certificate, PrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue_leaf(
    ca: tuple[x509.Certificate, PrivateKey],
    cn: str,
    *,
    server_names: Sequence[str] = (),
    client: bool = False,
    days: int = 365,
) -> tuple[x509.Certificate, PrivateKey]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_id(ca_cert), critical=False)
    )
    if server_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_san(n) for n in server_names]), critical=False
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def write_pair(out: Path, stem: str, cert: x509.Certificate, key: PrivateKey) -> tuple[Path, Path]:
    crt, k = out / f"{stem}.crt", out / f"{stem}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_secret(k, private_pem(key))
    return crt, k


def _write_secret(path: Path, data: bytes) -> None:
    write_secret(path, data)  # 0600 from creation, O_EXCL|O_NOFOLLOW (common/secretfile.py)


def kubeconfig(server: str, ca: Path, client_cert: Path, client_key: Path) -> str:
    """The --authentication-token-webhook-config-file, in the spec's layout.

    Values are JSON strings, which YAML reads as double-quoted scalars whatever they contain.
    """

    def q(value: object) -> str:
        return json.dumps(str(value))

    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: iam-webhook\n"
        "  cluster:\n"
        f"    server: {q(server)}\n"
        f"    certificate-authority: {q(ca)}\n"
        "users:\n"
        "- name: k8s-apiserver\n"
        "  user:\n"
        f"    client-certificate: {q(client_cert)}\n"
        f"    client-key: {q(client_key)}\n"
        "current-context: webhook\n"
        "contexts:\n"
        "- context:\n"
        "    cluster: iam-webhook\n"
        "    user: k8s-apiserver\n"
        "  name: webhook\n"
    )


def gen_dev_pki(s: PkiSettings) -> dict[str, Path]:
    out = s.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    ca = issue_ca(days=s.days)
    ca_crt, ca_key = write_pair(out, "ca", *ca)
    srv_crt, srv_key = write_pair(
        out, "server", *issue_leaf(ca, s.server_names[0], server_names=s.server_names, days=s.days)
    )
    cli_crt, cli_key = write_pair(
        out, "apiserver-client", *issue_leaf(ca, s.client_cn, client=True, days=s.days)
    )
    host = s.server_names[0]
    url = s.url or f"https://{f'[{host}]' if ':' in host else host}:8443{PATH}"
    kcfg = out / "iam-webhook.yaml"
    kcfg.write_text(kubeconfig(url, ca_crt, cli_crt, cli_key))
    signing = new_key(s.signing_alg)
    _write_secret(out / "signing.key", private_pem(signing))
    (out / "signing.pub").write_bytes(public_pem(signing))
    return {
        "ca": ca_crt,
        "ca_key": ca_key,
        "server_cert": srv_crt,
        "server_key": srv_key,
        "client_cert": cli_crt,
        "client_key": cli_key,
        "kubeconfig": kcfg,
        "signing_key": out / "signing.key",
        "signing_pub": out / "signing.pub",
    }


def load_signing_key(path: Path) -> tuple[Any, str]:
    """A PEM private key, or else the file's bytes as an HS256 shared secret."""
    data = path.read_bytes()
    if b"-----BEGIN" in data:
        key = serialization.load_pem_private_key(data, password=None)
        return key, alg_for(key)
    return data.strip(), "HS256"


def claims_for(s: MintSettings, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    claims: dict[str, Any] = {
        "iss": s.issuer,
        "sub": s.sub,
        "aud": list(s.audiences),
        "iat": int(now),
        "exp": int(now) + s.ttl,
        "jti": str(uuid.uuid4()),
    }
    if s.not_before:
        claims["nbf"] = int(now) + s.not_before
    for name, value in (("org_id", s.org), ("project_id", s.project)):
        if value:
            claims[name] = value
    if s.email:
        claims["email"], claims["email_verified"] = s.email, s.email_verified
    if s.roles:
        claims["roles"] = list(s.roles)
    if s.projects:
        claims["projects"] = list(s.projects)
    if s.service_account:
        claims["principal_type"], claims["sa_name"] = "service_account", s.service_account
    return claims


def mint(s: MintSettings, now: float | None = None) -> str:
    """DEVELOPMENT ONLY: a token signed with the dev key."""
    key, alg = load_signing_key(s.key)
    alg = s.alg or alg
    kid = s.kid
    if kid is None and alg != "HS256":
        kid = thumbprint(key.public_key())
    headers = {"kid": kid} if kid else None
    return jwt.encode(claims_for(s, now), key, algorithm=alg, headers=headers)
