"""The CNI request and result wire types: env + netconf parsing, error codes, result versions."""

from __future__ import annotations

import json

import pytest

from cni.errors import (
    CniError,
    DecodeFailure,
    DelegatedPluginError,
    IncompatibleVersion,
    InvalidEnvironment,
    InvalidNetworkConfig,
)
from cni.wire import CniRequest, CniResult, Dns, Interface, IpConfig, NetConf, Route

CONF = {"cniVersion": "1.0.0", "name": "prismnet", "type": "prismnet"}
ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "abc123",
    "CNI_NETNS": "/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0",
    "CNI_PATH": "/opt/cni/bin:/usr/lib/cni",
}


def _req(env: dict[str, str] | None = None, **conf: object) -> CniRequest:
    return CniRequest.from_env(env or ENV, json.dumps({**CONF, **conf}))


def test_add_request_parses_env_args_and_netconf() -> None:
    req = _req(mtu=1450)
    assert (req.command, req.container_id, req.netns, req.ifname) == ("ADD", "abc123", "/run/netns/x", "eth0")
    assert req.pod.namespace == "team-a" and req.pod.name == "web-0"
    assert req.path == ("/opt/cni/bin", "/usr/lib/cni")
    assert req.netconf.mtu == 1450 and req.netconf.ipam is None
    assert json.loads(req.netconf.raw)["name"] == "prismnet"


def test_namespace_defaults_to_default() -> None:
    assert _req({**ENV, "CNI_ARGS": ""}).pod.namespace == "default"


@pytest.mark.parametrize(
    ("env", "exc"),
    [
        ({**ENV, "CNI_COMMAND": "FROB"}, InvalidEnvironment),
        ({k: v for k, v in ENV.items() if k != "CNI_COMMAND"}, InvalidEnvironment),
        ({k: v for k, v in ENV.items() if k != "CNI_NETNS"}, InvalidEnvironment),
        ({**ENV, "CNI_IFNAME": "x" * 16}, InvalidEnvironment),
        ({**ENV, "CNI_CONTAINERID": "-bad"}, InvalidEnvironment),
        ({**ENV, "CNI_NETNS": "relative/path"}, InvalidEnvironment),
        ({**ENV, "CNI_ARGS": "novalue"}, InvalidEnvironment),
    ],
)
def test_bad_environment_is_code_4(env: dict[str, str], exc: type[CniError]) -> None:
    with pytest.raises(exc) as e:
        _req(env)
    assert e.value.code == 4


def test_del_needs_no_netns() -> None:
    env = {k: v for k, v in ENV.items() if k != "CNI_NETNS"}
    assert _req({**env, "CNI_COMMAND": "DEL"}).netns == ""


def test_gc_and_status_need_only_the_command() -> None:
    req = CniRequest.from_env(
        {"CNI_COMMAND": "GC"},
        json.dumps(
            {
                **CONF,
                "cniVersion": "1.1.0",
                "cni.dev/valid-attachments": [{"containerID": "a", "ifname": "eth0"}],
            }
        ),
    )
    assert req.netconf.valid_attachments == frozenset({("a", "eth0")})
    assert CniRequest.from_env({"CNI_COMMAND": "STATUS"}, json.dumps(CONF)).command == "STATUS"


@pytest.mark.parametrize(
    ("conf", "code"),
    [
        ({"cniVersion": "0.3.1"}, 1),
        ({"cniVersion": None}, 7),
        ({"name": ""}, 7),
        ({"name": "-x"}, 7),
        ({"mtu": 70000}, 7),
        ({"mtu": True}, 7),
        ({"ipam": []}, 7),
        ({"ipam": {"type": "a/b"}}, 7),
        ({"ovn": {"northbound": "nb:6641"}}, 7),
        ({"ovn": {"encapType": "gre"}}, 7),
        ({"prevResult": {"ips": [{"address": "not-an-ip"}]}}, 7),
        ({"cni.dev/valid-attachments": [{"containerID": "a"}]}, 7),
    ],
)
def test_bad_netconf_codes(conf: dict[str, object], code: int) -> None:
    with pytest.raises(CniError) as e:
        _req(**{k: v for k, v in conf.items()})
    assert e.value.code == code


def test_undecodable_netconf_is_code_6() -> None:
    with pytest.raises(DecodeFailure):
        CniRequest.from_env(ENV, b"{nope")
    with pytest.raises(DecodeFailure):
        NetConf.from_json(b"[1]")


def test_incompatible_version_names_the_supported_ones() -> None:
    with pytest.raises(IncompatibleVersion) as e:
        _req(cniVersion="2.0.0")
    assert "1.1.0" in e.value.details


RESULT = CniResult(
    interfaces=(
        Interface(name="pnabc", mac="aa:bb:cc:dd:ee:ff"),
        Interface(name="eth0", mac="0a:58:0a:00:00:05", mtu=1400, sandbox="/run/netns/x"),
    ),
    ips=(IpConfig(address="10.0.0.5/24", gateway="10.0.0.1", interface=1),),
    routes=(Route(dst="0.0.0.0/0", gw="10.0.0.1"),),
    dns=Dns(nameservers=("10.96.0.10",)),
)


def test_result_1_0_shape_and_round_trip() -> None:
    out = RESULT.to_dict("1.0.0")
    assert out["ips"] == [{"address": "10.0.0.5/24", "gateway": "10.0.0.1", "interface": 1}]
    assert out["interfaces"][1] == {
        "name": "eth0",
        "mac": "0a:58:0a:00:00:05",
        "mtu": 1400,
        "sandbox": "/run/netns/x",
    }
    assert out["dns"] == {"nameservers": ["10.96.0.10"]}
    assert CniResult.from_dict(out) == RESULT


def test_result_0_4_0_has_ip_version_and_no_mtu() -> None:
    out = RESULT.to_dict("0.4.0")
    assert out["ips"][0]["version"] == "4" and "mtu" not in out["interfaces"][1]


def test_error_reply_shape() -> None:
    assert InvalidNetworkConfig("bad", "why").to_reply("1.0.0") == {
        "cniVersion": "1.0.0",
        "code": 7,
        "msg": "bad",
        "details": "why",
    }
    assert "details" not in InvalidNetworkConfig("bad").to_reply()
    assert DelegatedPluginError(42, "ipam said no").to_reply()["code"] == 42
