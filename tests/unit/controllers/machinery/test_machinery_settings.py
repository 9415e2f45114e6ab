"""Common controller flags: env fallbacks, defaults, errors, the controller's own flags."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

import pytest

from controllers.machinery.settings import parse


def own_flags(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    p.add_argument("--external-ip-pool", default=env.get("EXTERNAL_IP_POOL", ""))


def test_defaults_in_a_pod() -> None:
    env = {"POD_NAME": "fiberlb-7d9-x", "POD_NAMESPACE": "plasmacloud-system"}
    s = parse("fiberlb-controller", "", [], env, prefix="FIBERLB_", add_arguments=own_flags)
    assert s.leader_elect is True
    assert s.lease.name == "fiberlb-controller"
    assert s.lease.namespace == "plasmacloud-system"
    assert s.lease.identity.startswith("fiberlb-7d9-x_")
    assert (s.lease.lease_duration, s.lease.renew_deadline, s.lease.retry_period) == (15, 10, 2)
    assert (s.metrics_host, s.metrics_port) == ("127.0.0.1", 8080)  # not every interface by default
    assert s.kubeconfig is None
    assert s.instance == "fiberlb-7d9-x"
    assert s.args.external_ip_pool == ""
    assert not hasattr(s.args, "workers")


def test_env_fallbacks_and_flags_win() -> None:
    env = {
        "KUBECONFIG": "/tmp/kc",
        "FIBERLB_LEADER_ELECT": "false",
        "FIBERLB_WORKERS": "4",
        "FIBERLB_METRICS_ADDRESS": "127.0.0.1:0",
        "EXTERNAL_IP_POOL": "192.0.2.0/24",
    }
    s = parse("fiberlb-controller", "", ["--workers", "8"], env, prefix="FIBERLB_", add_arguments=own_flags)
    assert s.kubeconfig == Path("/tmp/kc")
    assert s.leader_elect is False
    assert s.workers == 8
    assert (s.metrics_host, s.metrics_port) == ("127.0.0.1", 0)
    assert s.args.external_ip_pool == "192.0.2.0/24"
    s = parse("x", "", ["--leader-elect", "--metrics-address", "off"], env, prefix="FIBERLB_")
    assert s.leader_elect is True
    assert s.metrics_port is None


@pytest.mark.parametrize(
    "argv",
    [
        ["--leader-elect-renew-deadline", "20"],  # longer than the lease: two leaders possible
        ["--workers", "0"],
        ["--metrics-address", "nonsense"],
        ["--leader-elect", "maybe"],
    ],
)
def test_bad_flags_exit_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse("x", "", argv, {})
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_help_names_every_env_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("fiberlb-controller", "", ["--help"], {}, prefix="FIBERLB_")
    out = capsys.readouterr().out
    for var in (
        "KUBECONFIG",
        "FIBERLB_LEADER_ELECT_LEASE_DURATION",
        "FIBERLB_METRICS_ADDRESS",
        "FIBERLB_WORKERS",
    ):
        assert var in out
