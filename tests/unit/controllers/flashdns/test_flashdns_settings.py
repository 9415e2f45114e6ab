"""FlashDNS flags and env fallbacks, and where the upstream resolvers come from."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from common.plasmacloud_grpc import PlasmaCloudAuth
from controllers.flashdns.embedded_backend import upstreams
from controllers.flashdns.forwarder import Upstream, upstreams_from_resolv_conf
from controllers.flashdns.settings import FlashDnsSettings, add_arguments


def parse(argv: list[str], env: dict[str, str] | None = None) -> FlashDnsSettings:
    p = argparse.ArgumentParser()
    add_arguments(p, env or {})
    return FlashDnsSettings.from_args(p.parse_args(argv))


def test_defaults_flags_and_env() -> None:
    assert parse([]) == FlashDnsSettings()
    creds = {"PLASMACLOUD_CA": "/pc/ca.crt", "PLASMACLOUD_TOKEN_FILE": "/pc/token"}
    s = parse(
        ["--dns-ttl", "10", "--backend", "flashdns"], {"FLASHDNS_CLUSTER_DOMAIN": "corp.local", **creds}
    )
    assert (s.dns_ttl, s.backend, s.cluster_domain) == (10, "flashdns", "corp.local")
    assert s.plasmacloud == PlasmaCloudAuth(ca=Path("/pc/ca.crt"), token_file=Path("/pc/token"))


@pytest.mark.parametrize(
    "argv", [["--backend", "bind"], ["--cluster-domain", "."], ["--dns-ttl", "-1"], ["--backend", "flashdns"]]
)
def test_bad_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(ValueError):
        parse(argv)


def test_resolv_conf_upstreams_skip_ourselves_and_junk(tmp_path: Path) -> None:
    rc = tmp_path / "resolv.conf"
    rc.write_text("search x\nnameserver 10.96.0.10\nnameserver 192.0.2.53\nnameserver fe80::1%eth0\n"
                  "nameserver bogus\nnameserver 192.0.2.53\noptions ndots:5\n")  # fmt: skip
    got = upstreams_from_resolv_conf(rc, exclude=[Upstream("10.96.0.10")])
    assert got == (Upstream("192.0.2.53"), Upstream("fe80::1"))
    s = FlashDnsSettings(resolv_conf=str(rc), cluster_dns_ip="10.96.0.10")
    assert upstreams(s) == got
    assert upstreams(FlashDnsSettings(upstreams="none", resolv_conf=str(rc))) == ()
    assert upstreams(FlashDnsSettings(upstreams="192.0.2.1:5353,[fd00::1]:53")) == (
        Upstream("192.0.2.1", 5353),
        Upstream("fd00::1", 53),
    )
    assert upstreams_from_resolv_conf(tmp_path / "missing") == ()
