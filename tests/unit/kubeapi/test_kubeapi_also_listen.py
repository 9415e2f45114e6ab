"""`--also-listen NETNS=HOST:PORT` (and KUBEAPI_ALSO_LISTEN): parsed once, bad values refused."""

from __future__ import annotations

import pytest

from nodeenv.kubeapi.settings import Listener, parse


def test_listeners_parse_from_the_flag_and_the_environment() -> None:
    s = parse(["--dir", "/tmp/x", "--also-listen", "k8shc-underlay=10.250.0.1:6443, other=10.0.0.1:7443"], {})
    assert s.also == (Listener("k8shc-underlay", "10.250.0.1", 6443), Listener("other", "10.0.0.1", 7443))
    assert s.also[0].url == "https://10.250.0.1:6443"
    env = parse(["--dir", "/tmp/x"], {"KUBEAPI_ALSO_LISTEN": "ns=10.1.1.1:1"})
    assert env.also == (Listener("ns", "10.1.1.1", 1),)
    assert parse(["--dir", "/tmp/x"], {}).also == ()


BAD = ["10.250.0.1:6443", "ns=10.250.0.1", "ns=:6443", "=1.2.3.4:5", "ns=1.2.3.4:x"]


@pytest.mark.parametrize("bad", BAD)
def test_a_malformed_listener_is_refused_with_the_form(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--dir", "/tmp/x", "--also-listen", bad], {})
    assert "NETNS=HOST:PORT" in capsys.readouterr().err
