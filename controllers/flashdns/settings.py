"""FlashDNS's own flags (the machinery parses the common ones): the only reader of its argv/env.

Every flag falls back to an environment variable `FLASHDNS_<FLAG>`; `flashdns-controller --help`
lists them all.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Self

from common.plasmacloud_grpc import PlasmaCloudAuth, add_flags

ENV_PREFIX = "FLASHDNS_"
BACKENDS = ("embedded", "flashdns")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashDnsSettings:
    cluster_domain: str = "cluster.local"
    """The zone the records live in."""
    dns_ttl: int = 30
    """TTL of every record (seconds; low for fast convergence)."""
    negative_ttl: int = 5
    """SOA minimum: how long resolvers cache NXDOMAIN/NODATA (a recreated pod resolves within it)."""
    backend: str = "embedded"
    """embedded: serve DNS ourselves; flashdns: write records to the FlashDNS gRPC API."""
    flashdns_endpoint: str = "flashdns-server:6000"
    """host:port of the FlashDNS DNSService (backend flashdns)."""
    dns_address: str = "0.0.0.0:53"
    """UDP+TCP address of the embedded server (port 0: a free port, see dns_port_file)."""
    dns_port_file: str = ""
    """Written once the embedded server listens: {"dns": port} (for port 0)."""
    cluster_dns_ip: str = ""
    """The cluster DNS Service IP (e.g. 10.96.0.10): glue for ns.dns.<domain>, never an upstream."""
    upstreams: str = ""
    """Comma-separated resolvers for other names ('' = the resolv.conf's, 'none' = no forwarding)."""
    resolv_conf: str = "/etc/resolv.conf"
    forward_timeout: float = 2.0
    """Seconds per upstream before trying the next."""
    debounce: float = 0.25
    """Seconds EndpointSlice churn is gathered before a Service's records are rebuilt."""
    resync_interval: float = 60.0
    """Seconds between full resyncs from ListRecords (backend flashdns): repairs drift."""
    plasmacloud: PlasmaCloudAuth | None = None
    """backend flashdns: CA and IAM token file of its TLS + token calls (the --plasmacloud-* flags)."""

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> Self:
        auth = PlasmaCloudAuth.from_args(ns) if ns.backend == "flashdns" else None
        out = cls(**{f.name: getattr(ns, f.name) for f in fields(cls) if f.name in HELP}, plasmacloud=auth)
        out.validate()
        return out

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}")
        if not self.cluster_domain.strip("."):
            raise ValueError("--cluster-domain must not be empty")
        if self.dns_ttl < 0 or self.negative_ttl < 0 or self.debounce < 0 or self.resync_interval <= 0:
            raise ValueError("TTLs and intervals must not be negative")

    @property
    def resolv_conf_path(self) -> Path:
        return Path(self.resolv_conf)


HELP = {
    "cluster_domain": "cluster domain the records live in",
    "dns_ttl": "TTL of every record in seconds",
    "negative_ttl": "TTL of negative answers (SOA minimum) in seconds",
    "backend": "embedded (serve DNS) or flashdns (FlashDNS gRPC API)",
    "flashdns_endpoint": "host:port of the FlashDNS DNSService",
    "dns_address": "UDP+TCP listen address of the embedded server",
    "dns_port_file": "file to write {'dns': port} to once listening",
    "cluster_dns_ip": "cluster DNS Service IP (NS glue; never used as an upstream)",
    "upstreams": "comma-separated upstream resolvers ('' = resolv.conf, 'none' = no forwarding)",
    "resolv_conf": "resolv.conf to take upstreams from",
    "forward_timeout": "seconds per upstream attempt",
    "debounce": "seconds EndpointSlice churn is gathered per Service",
    "resync_interval": "seconds between full ListRecords resyncs (backend flashdns)",
}


def add_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """The machinery's `add_arguments` hook: our flags with FLASHDNS_* fallbacks."""
    d = FlashDnsSettings()
    add_flags(parser, env)
    for f in (f for f in fields(FlashDnsSettings) if f.name in HELP):
        default: Any = getattr(d, f.name)
        var = ENV_PREFIX + f.name.upper()
        conv = type(default)
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            type=conv,
            default=conv(env[var]) if var in env else default,
            help=f"{HELP[f.name]} (env {var}; default {default!r})",
        )
