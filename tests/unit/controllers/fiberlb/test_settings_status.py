from __future__ import annotations

from pathlib import Path

import pytest

from common.plasmacloud_grpc import PlasmaCloudAuth
from controllers.fiberlb.main import app
from controllers.fiberlb.settings import FiberlbSettings, add_arguments
from controllers.fiberlb.status import CONDITION, condition_differs, merged_conditions
from controllers.machinery.settings import parse
from controllers.resources import Service


def settings(argv: list[str], env: dict[str, str] | None = None) -> FiberlbSettings:
    s = parse("fiberlb-controller", "", argv, env or {}, prefix="FIBERLB_", add_arguments=add_arguments)
    return FiberlbSettings.from_args(s.args)


def test_flags_and_env_fallbacks() -> None:
    creds = {"PLASMACLOUD_CA": "/pc/ca.crt", "PLASMACLOUD_TOKEN_FILE": "/pc/token"}
    s = settings(["--external-ip-pool", "10.0.0.0/24", "--default-class", "--backend", "fiberlb"], creds)
    assert (s.external_ip_pool, s.default_class, s.backend, s.debounce) == (
        "10.0.0.0/24",
        True,
        "fiberlb",
        0.1,
    )
    assert s.plasmacloud == PlasmaCloudAuth(ca=Path("/pc/ca.crt"), token_file=Path("/pc/token"))
    env = {"FIBERLB_EXTERNAL_IP_POOL": "10.1.0.1-10.1.0.9", "FIBERLB_DEFAULT_CLASS": "true",
           "FIBERLB_OVN_NB_DB": "tcp:1.2.3.4:6641", "FIBERLB_DEBOUNCE": "0.5"}  # fmt: skip
    s = settings([], env)
    assert (s.external_ip_pool, s.default_class, s.ovn_nb_db, s.debounce) == (
        "10.1.0.1-10.1.0.9", True, "tcp:1.2.3.4:6641", 0.5,
    )  # fmt: skip
    assert settings(["--external-ip-pool=10.0.0.0/24"]).default_class is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--external-ip-pool is required"),
        (["--external-ip-pool", "nope"], "bad external IP pool"),
        (["--external-ip-pool", "10.0.0.0/24", "--debounce", "100"], "--debounce"),
        (["--backend", "fiberlb"], "TLS with an IAM token only"),
    ],
)
def test_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings(argv)


def test_help_names_every_flag_with_its_env(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        app.main(["--help"])
    out = capsys.readouterr().out
    for var in (
        "FIBERLB_EXTERNAL_IP_POOL",
        "FIBERLB_DEFAULT_CLASS",
        "FIBERLB_BACKEND",
        "FIBERLB_FIBERLB_ENDPOINT",
    ):
        assert var in out


def test_conditions_keep_others_and_the_transition_time() -> None:
    other = {"type": "Other", "status": "True"}
    first = merged_conditions([other], False, "IPPoolExhausted", "full")
    assert first[0] == other and first[1]["type"] == CONDITION and first[1]["status"] == "False"
    since = first[1]["lastTransitionTime"]
    again = merged_conditions(
        [other, {**first[1], "lastTransitionTime": "2020-01-01T00:00:00Z"}], False, "X", "y"
    )
    assert again[1]["lastTransitionTime"] == "2020-01-01T00:00:00Z"  # same status: time kept
    flipped = merged_conditions(again, True, "Ready", "ok")
    assert flipped[1]["lastTransitionTime"] != "2020-01-01T00:00:00Z" and since


def test_condition_differs() -> None:
    svc = Service.from_dict({"metadata": {"namespace": "n", "name": "s"}, "status": {"conditions": [
        {"type": CONDITION, "status": "True", "reason": "Ready", "message": "ok"}]}})  # fmt: skip
    assert not condition_differs(svc, True, "Ready", "ok")
    assert condition_differs(svc, True, "Ready", "other message")
    assert condition_differs(svc, False, "Ready", "ok")
