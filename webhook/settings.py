"""The only reader of argv and the environment. Every flag has an environment fallback.

`iam-webhook serve` → ServeSettings, `gen-dev-pki` → PkiSettings, `mint` → MintSettings.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from webhook.keys import RefreshPolicy
from webhook.mapping import MappingSettings
from webhook.tokens import ALLOWED_ALGORITHMS, TokenPolicy

PATH = "/apis/iam.plasmacloud.io/v1/authenticate"
DEFAULT_CLIENT_CN = "k8s-apiserver"
"""The CN of the API server's webhook client certificate (`iam-webhook gen-dev-pki`, the API double)."""
DEV_WARNING = "DEVELOPMENT ONLY: never use these keys, certificates or tokens in production."


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    host: str = "0.0.0.0"
    port: int = 8443
    health_host: str = "127.0.0.1"
    health_port: int | None = 8081
    """Plain-HTTP /healthz, /readyz, /metrics for kubelet probes and Prometheus (None: off)."""
    port_file: Path | None = None
    """Written after binding: {"https": port, "health": port} (for port 0)."""
    tls_cert: Path
    tls_key: Path
    client_ca: Path
    client_cn: str = DEFAULT_CLIENT_CN
    """Only the API server's client certificate (this CN) of the client CA is accepted."""
    token: TokenPolicy
    audiences: tuple[str, ...]
    key_files: tuple[Path, ...] = ()
    hmac_secret_files: tuple[Path, ...] = ()
    jwks_url: str | None = None
    jwks_ca: Path | None = None
    refresh: RefreshPolicy = field(default_factory=RefreshPolicy)
    cache_ttl: float = 10.0
    cache_size: int = 10000
    max_body: int = 131072
    mapping: MappingSettings = field(default_factory=MappingSettings)
    log_level: str = "info"

    def __post_init__(self) -> None:
        if not (self.key_files or self.hmac_secret_files or self.jwks_url):
            raise ValueError("no key source: give --key-file, --hmac-secret-file or --jwks-url")
        if not self.audiences:
            raise ValueError("--audience is required")
        if not self.client_cn:
            raise ValueError("--client-cn must name the API server's client certificate CN")
        if self.jwks_url and not self.jwks_url.lower().startswith("https://"):
            raise ValueError(
                f"--jwks-url must be an https:// URL (keys are trusted from it), not {self.jwks_url!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PkiSettings:
    out: Path
    server_names: tuple[str, ...] = ("localhost", "127.0.0.1")
    url: str | None = None
    client_cn: str = DEFAULT_CLIENT_CN
    signing_alg: str = "ES256"
    days: int = 365


@dataclass(frozen=True, slots=True, kw_only=True)
class MintSettings:
    key: Path
    alg: str | None
    issuer: str
    audiences: tuple[str, ...]
    sub: str
    email: str | None = None
    email_verified: bool = True
    org: str | None = None
    project: str | None = None
    projects: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    service_account: str | None = None
    ttl: int = 3600
    not_before: int = 0
    kid: str | None = None


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def _add(
    p: argparse.ArgumentParser, flag: str, env: Mapping[str, str], var: str, default: object, help: str
) -> None:
    p.add_argument(flag, default=env.get(var, default), help=f"{help} (env {var}; default {default})")


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], env: Mapping[str, str]) -> None:
    text = "serve TokenReviews over HTTPS + mTLS; every flag falls back to the env variable named"
    p = sub.add_parser("serve", help=text, description=text)
    for flag, var, default, text in (
        ("--host", "IAM_WEBHOOK_HOST", "0.0.0.0", "HTTPS listen address"),
        ("--port", "IAM_WEBHOOK_PORT", "8443", "HTTPS port (0: pick a free one)"),
        ("--health-host", "IAM_WEBHOOK_HEALTH_HOST", "127.0.0.1", "plain-HTTP health/metrics address"),
        ("--health-port", "IAM_WEBHOOK_HEALTH_PORT", "8081", "plain-HTTP health/metrics port ('off')"),
        ("--port-file", "IAM_WEBHOOK_PORT_FILE", None, "write the bound ports here as JSON"),
        ("--tls-cert", "IAM_WEBHOOK_TLS_CERT", None, "serving certificate (PEM)"),
        ("--tls-key", "IAM_WEBHOOK_TLS_KEY", None, "serving key (PEM)"),
        ("--client-ca", "IAM_WEBHOOK_CLIENT_CA", None, "CA that issued the apiserver's client cert"),
        ("--client-cn", "IAM_WEBHOOK_CLIENT_CN", DEFAULT_CLIENT_CN, "accept only this client certificate CN"),
        ("--issuer", "IAM_ISSUER", None, "trusted token issuer(s), comma-separated"),
        ("--audience", "IAM_AUDIENCE", None, "accepted audience(s), comma-separated"),
        ("--key-file", "IAM_KEY_FILES", None, "PEM public keys / JWK set files, comma-separated"),
        ("--hmac-secret-file", "IAM_HMAC_SECRET_FILES", None, "HS256 shared secret files, comma-separated"),
        ("--jwks-url", "IAM_JWKS_URL", None, "JWKS URL of the issuer (https only)"),
        ("--jwks-ca", "IAM_JWKS_CA", None, "CA bundle to verify the JWKS URL"),
        ("--algorithms", "IAM_ALGORITHMS", ",".join(sorted(ALLOWED_ALGORITHMS)), "accepted JWT algorithms"),
        ("--leeway", "IAM_LEEWAY", "30", "clock skew allowed for exp/nbf/iat, seconds (<= 300)"),
        ("--jwks-refresh", "IAM_JWKS_REFRESH", "300", "JWKS refresh period without Cache-Control"),
        ("--jwks-min-refresh", "IAM_JWKS_MIN_REFRESH", "10", "lower bound on the JWKS refresh period"),
        (
            "--unknown-kid-refetch",
            "IAM_JWKS_REFETCH_INTERVAL",
            "30",
            "min seconds between unknown-kid refetches",
        ),
        ("--poll", "IAM_WEBHOOK_POLL", "2", "seconds between checks of key and certificate files"),
        ("--cache-ttl", "IAM_WEBHOOK_CACHE_TTL", "10", "seconds a positive review is cached (0: off)"),
        ("--cache-size", "IAM_WEBHOOK_CACHE_SIZE", "10000", "max cached reviews"),
        ("--max-body", "IAM_WEBHOOK_MAX_BODY", "131072", "max request body bytes"),
        ("--max-token", "IAM_WEBHOOK_MAX_TOKEN", "16384", "max token bytes"),
        ("--log-level", "IAM_WEBHOOK_LOG_LEVEL", "info", "log level"),
    ):
        _add(p, flag, env, var, default, text)
    for f in dataclasses.fields(MappingSettings):
        var = f"IAM_MAP_{f.name.upper()}"
        _add(p, "--map-" + f.name.replace("_", "-"), env, var, f.default, "claim mapping")


def _pki_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], env: Mapping[str, str]) -> None:
    text = f"generate a dev CA, certificates, kubeconfig, signing key. {DEV_WARNING}"
    p = sub.add_parser("gen-dev-pki", help=text, description=text)
    _add(p, "--out", env, "IAM_WEBHOOK_PKI_DIR", None, "output directory")
    _add(p, "--server-name", env, "IAM_WEBHOOK_SERVER_NAMES", "localhost,127.0.0.1", "serving cert SANs")
    _add(p, "--url", env, "WEBHOOK_URL", None, "webhook URL for the kubeconfig (default from the 1st SAN)")
    _add(p, "--client-cn", env, "IAM_WEBHOOK_CLIENT_CN", DEFAULT_CLIENT_CN, "apiserver client cert CN")
    _add(p, "--signing-alg", env, "IAM_DEV_SIGNING_ALG", "ES256", "dev signing key: RS256, ES256, EdDSA")
    _add(p, "--days", env, "IAM_WEBHOOK_PKI_DAYS", "365", "certificate lifetime in days")


def _mint_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], env: Mapping[str, str]) -> None:
    text = f"print a token signed with the dev signing key. {DEV_WARNING}"
    p = sub.add_parser("mint", help=text, description=text)
    _add(p, "--key", env, "IAM_DEV_SIGNING_KEY", None, "PEM private key (or HS256 secret file)")
    _add(p, "--alg", env, "IAM_DEV_SIGNING_ALG", None, "algorithm (default: from the key)")
    _add(p, "--issuer", env, "IAM_ISSUER", None, "iss")
    _add(p, "--audience", env, "IAM_AUDIENCE", None, "aud, comma-separated")
    p.add_argument("--sub", required=True, help="sub (the IAM user id, e.g. user-<uuid>)")
    p.add_argument("--email")
    p.add_argument("--email-unverified", action="store_true", help="set email_verified=false")
    p.add_argument("--org")
    p.add_argument("--project")
    p.add_argument("--projects", help="all projects of an org admin, comma-separated")
    p.add_argument("--roles", help="comma-separated, e.g. org_admin,project_member")
    p.add_argument("--service-account", help="make a service-account token with this name")
    p.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (negative: expired)")
    p.add_argument("--not-before", type=int, default=0, help="nbf offset from now in seconds")
    p.add_argument("--kid", help="kid header (default: the key's RFC 7638 thumbprint)")


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iam-webhook",
        description="PlasmaCloud IAM TokenReview webhook for kube-apiserver "
        f"(POST {PATH}, authentication.k8s.io/v1 and v1beta1).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    _serve_parser(sub, env)
    _pki_parser(sub, env)
    _mint_parser(sub, env)
    return p


def parse(argv: Sequence[str], env: Mapping[str, str]) -> ServeSettings | PkiSettings | MintSettings:
    parser = build_parser(env)
    a = parser.parse_args(list(argv))
    try:
        if a.command == "serve":
            return _serve(a)
        if a.command == "gen-dev-pki":
            return _pki(a)
        return _mint(a)
    except (ValueError, TypeError) as e:
        parser.error(str(e))
        raise  # unreachable: parser.error exits


def _required(a: argparse.Namespace, name: str) -> str:
    value = getattr(a, name)
    if not value:
        raise ValueError(f"--{name.replace('_', '-')} is required")
    return str(value)


def _mapping(a: argparse.Namespace) -> MappingSettings:
    values: dict[str, object] = {}
    for f in dataclasses.fields(MappingSettings):
        raw = getattr(a, "map_" + f.name)
        values[f.name] = str(raw).lower() in ("1", "true", "yes") if f.type == "bool" else str(raw)
    return MappingSettings(**values)  # type: ignore[arg-type]


def _serve(a: argparse.Namespace) -> ServeSettings:
    token = TokenPolicy(
        issuers=_csv(_required(a, "issuer")),
        algorithms=frozenset(_csv(a.algorithms)),
        leeway=float(a.leeway),
        max_token_bytes=int(a.max_token),
    )
    refresh = RefreshPolicy(
        default_refresh=float(a.jwks_refresh),
        min_refresh=float(a.jwks_min_refresh),
        unknown_kid_refetch=float(a.unknown_kid_refetch),
        file_poll=float(a.poll),
    )
    return ServeSettings(
        host=a.host,
        port=int(a.port),
        health_host=a.health_host,
        health_port=None if str(a.health_port).lower() == "off" else int(a.health_port),
        port_file=Path(a.port_file) if a.port_file else None,
        tls_cert=Path(_required(a, "tls_cert")),
        tls_key=Path(_required(a, "tls_key")),
        client_ca=Path(_required(a, "client_ca")),
        client_cn=a.client_cn,
        token=token,
        audiences=_csv(_required(a, "audience")),
        key_files=tuple(Path(p) for p in _csv(a.key_file)),
        hmac_secret_files=tuple(Path(p) for p in _csv(a.hmac_secret_file)),
        jwks_url=a.jwks_url or None,
        jwks_ca=Path(a.jwks_ca) if a.jwks_ca else None,
        refresh=refresh,
        cache_ttl=float(a.cache_ttl),
        cache_size=int(a.cache_size),
        max_body=int(a.max_body),
        mapping=_mapping(a),
        log_level=a.log_level,
    )


def _pki(a: argparse.Namespace) -> PkiSettings:
    return PkiSettings(
        out=Path(_required(a, "out")),
        server_names=_csv(a.server_name),
        url=a.url or None,
        client_cn=a.client_cn,
        signing_alg=a.signing_alg,
        days=int(a.days),
    )


def _mint(a: argparse.Namespace) -> MintSettings:
    return MintSettings(
        key=Path(_required(a, "key")),
        alg=a.alg or None,
        issuer=_required(a, "issuer"),
        audiences=_csv(_required(a, "audience")),
        sub=a.sub,
        email=a.email,
        email_verified=not a.email_unverified,
        org=a.org,
        project=a.project,
        projects=_csv(a.projects),
        roles=_csv(a.roles),
        service_account=a.service_account,
        ttl=a.ttl,
        not_before=a.not_before,
        kid=a.kid,
    )
