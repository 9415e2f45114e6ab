"""OVN's databases over mutual TLS: the one place a client's key, certificate and CA are set.

A component reaching the NB or SB over `ssl:` presents its own certificate (signed by the
cluster's OVN CA) and checks the server's against that CA. Its settings take the three paths from
`add_arguments` (flags with `OVN_SSL_*` env fallbacks, shared by every program, as KUBECONFIG
is); `use` checks them (the key 0600, or 0440 as kubelet gives a Secret to a non-root container,
never readable by others) and hands them to python-ovs, whose
`ssl:` stream loads them for every new connection: a renewed file is used from the next
(re)connection on, without a restart. `ctl_flags` gives the same files to ovn-nbctl/ovn-sbctl/
ovs-vsctl/ovsdb-client, and to ovsdb-server, ovn-northd and ovn-controller, which take the same
options (their stream-ssl re-reads a changed file too).

Stdlib only at import (settings import it); python-ovs is imported when the files are applied.
"""

from __future__ import annotations

import argparse
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

ENV = {
    "private_key": "OVN_SSL_PRIVATE_KEY",
    "certificate": "OVN_SSL_CERTIFICATE",
    "ca_cert": "OVN_SSL_CA_CERT",
}
"""Field -> the environment variable each program falls back to."""
KEY_MODE_FORBIDDEN = 0o037
"""Group write/execute and anything for others."""


class TlsNotConfigured(ValueError):
    """An `ssl:` remote with no client key, certificate and CA given."""


class InsecureKey(ValueError):
    """A private key others may read, or its group write (or a missing key)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OvnTls:
    private_key: Path
    certificate: Path
    ca_cert: Path
    """The cluster's OVN CA: the only issuer a server's certificate is accepted from."""

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Self | None:
        """The three paths from `add_arguments`' flags; None when none is given, ValueError when
        only some are (a half-configured client would fail later, less clearly)."""
        given = {f: getattr(a, f"ovn_ssl_{f}") or "" for f in ENV}
        if not any(given.values()):
            return None
        missing = [f"--ovn-ssl-{f.replace('_', '-')}" for f, v in given.items() if not v]
        if missing:
            raise ValueError(f"OVN TLS needs all of key, certificate and CA: {', '.join(missing)} not given")
        return cls(**{f: Path(v) for f, v in given.items()})

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self | None:
        given = {f"ovn_ssl_{f}": env.get(var, "") for f, var in ENV.items()}
        return cls.from_args(argparse.Namespace(**given))

    def env(self) -> dict[str, str]:
        """The variables a child program reads these paths from."""
        return {var: str(getattr(self, f)) for f, var in ENV.items()}

    def ctl_flags(self) -> list[str]:
        """The options OVS/OVN programs take for these files (ovn-nbctl, ovsdb-server, ...)."""
        return [f"--private-key={self.private_key}", f"--certificate={self.certificate}",
                f"--ca-cert={self.ca_cert}"]  # fmt: skip

    def check(self) -> None:
        """InsecureKey unless the key is a file only its owner can write and nobody else read
        (0600/0400), or else its group read too (0640/0440: how kubelet gives a Secret to a
        non-root container, through the pod's fsGroup); FileNotFoundError for a missing
        certificate or CA."""
        try:
            st = self.private_key.stat()
        except FileNotFoundError:
            raise InsecureKey(f"OVN TLS private key {self.private_key} does not exist") from None
        if not stat.S_ISREG(st.st_mode) or st.st_mode & KEY_MODE_FORBIDDEN:
            raise InsecureKey(
                f"OVN TLS private key {self.private_key} has mode {stat.S_IMODE(st.st_mode):04o}: "
                "it must be a file nobody but its owner (and its group, read-only) can read (0600)"
            )
        for path in (self.certificate, self.ca_cert):
            if not path.is_file():
                raise FileNotFoundError(f"OVN TLS file {path} does not exist")


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """--ovn-ssl-private-key, --ovn-ssl-certificate, --ovn-ssl-ca-cert (env OVN_SSL_*)."""
    helps = {
        "private_key": "this client's private key for ssl: OVN remotes (0600)",
        "certificate": "this client's certificate, signed by the cluster's OVN CA",
        "ca_cert": "the cluster's OVN CA certificate: the servers' certificates are checked against it",
    }
    for field, var in ENV.items():
        p.add_argument(f"--ovn-ssl-{field.replace('_', '-')}", default=env.get(var, ""),
                       help=f"{helps[field]} (env {var}; default none)")  # fmt: skip


_applied: OvnTls | None = None


def use(tls: OvnTls | None) -> None:
    """Check `tls` and give it to python-ovs for every later `ssl:` connection of this process
    (python-ovs keeps one client identity per process). None: nothing (unix:/tcp: remotes only)."""
    global _applied
    if tls is None:
        return
    tls.check()
    from ovs.stream import Stream  # type: ignore[import-untyped]

    Stream.ssl_set_private_key_file(str(tls.private_key))
    Stream.ssl_set_certificate_file(str(tls.certificate))
    Stream.ssl_set_ca_cert_file(str(tls.ca_cert))
    _applied = tls


def applied() -> OvnTls | None:
    return _applied


def require_for(remotes: Iterable[str]) -> None:
    """TlsNotConfigured when a remote is `ssl:` and `use` was not given the files: say so before
    python-ovs fails each connection with an opaque error and retries forever."""
    ssl = [r for r in remotes if r.startswith("ssl:")]
    if ssl and _applied is None:
        raise TlsNotConfigured(
            f"OVN remote {ssl[0]} is ssl: but no client key, certificate and CA are set "
            f"(--ovn-ssl-private-key/--ovn-ssl-certificate/--ovn-ssl-ca-cert or {', '.join(ENV.values())})"
        )
