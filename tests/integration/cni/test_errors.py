"""Bad input through the real executable gets the CNI SPEC's error codes, on stdout, exit 1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.cni.conftest import Agent, Pods, post_to_agent


def _call(agent: Agent, env: dict[str, str], stdin: str) -> tuple[int, dict]:
    """The executable with a runtime's environment: the agent is found through the netconf only."""
    exe = agent.env["PRISMNET_CNI_BIN"]
    full = {"PATH": "/usr/bin:/bin", "CNI_PATH": "/usr/lib/cni", **env}
    proc = subprocess.run([exe], input=stdin.encode(), env=full, capture_output=True)
    return proc.returncode, json.loads(proc.stdout or b"{}")


def _conf(agent: Agent, **over: object) -> str:
    conf = {**agent.conflist["plugins"][0], "name": "prismnet", "cniVersion": "1.0.0", **over}
    return json.dumps({k: v for k, v in conf.items() if v is not None})


ADD = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "errtest000000000000",
    "CNI_IFNAME": "eth0",
    "CNI_NETNS": "/run/netns/does-not-exist-cni",
    "CNI_ARGS": "K8S_POD_NAMESPACE=err;K8S_POD_NAME=e",
}


@pytest.mark.parametrize(
    ("env", "conf", "code"),
    [
        ({**ADD, "CNI_COMMAND": "FROB"}, {}, 4),
        ({k: v for k, v in ADD.items() if k != "CNI_NETNS"}, {}, 4),
        ({**ADD, "CNI_IFNAME": "a/b"}, {}, 4),
        ({**ADD, "CNI_CONTAINERID": "bad id!"}, {}, 4),
        ({**ADD, "CNI_ARGS": "garbage"}, {}, 4),
        (ADD, {"cniVersion": "0.3.1"}, 1),
        (ADD, {"mtu": "big"}, 7),
        (ADD, {"name": None}, 7),
        (ADD, {"ipam": {"type": "../evil"}}, 7),
        (ADD, {"ovn": {"northbound": "http://nb:6641"}}, 7),
        (ADD, {"ovn": {"northbound": "tcp:10.0.0.1:6641"}}, 7),
        (ADD, {"ipam": {"type": "prismnet-ipam", "subnet": "10.1.0.0/16"}}, 7),
        (ADD, {"ipam": {"type": "no-such-ipam-plugin"}}, 7),
        ({**ADD, "CNI_COMMAND": "CHECK"}, {}, 7),  # no prevResult
        (ADD, {}, 3),  # the netns does not exist
    ],
)
def test_invalid_requests_get_cni_error_codes(
    agent: Agent, env: dict[str, str], conf: dict, code: int
) -> None:
    rc, out = _call(agent, env, _conf(agent, **conf))
    assert rc == 1
    assert out["code"] == code, out
    assert out["msg"]


def test_undecodable_stdin_is_code_6(agent: Agent) -> None:
    rc, out = _call(agent, ADD, "{not json")
    assert (rc, out["code"]) == (1, 6)


def test_failed_add_leaves_no_port(agent: Agent) -> None:
    _call(agent, ADD, _conf(agent))
    assert "e-errtest" not in agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port")


def test_agent_unreachable_is_code_11_naming_the_agent(agent: Agent, tmp_path: Path) -> None:
    rc, out = _call(agent, ADD, _conf(agent, agentSocket=str(tmp_path / "none.sock")))
    assert (rc, out["code"]) == (1, 11)
    assert "start prismnet-agent" in out["msg"] and str(tmp_path / "none.sock") in out["msg"]
    conf = _conf(agent, cniVersion="1.1.0", agentSocket=str(tmp_path / "x"))
    rc, out = _call(agent, {"CNI_COMMAND": "STATUS"}, conf)
    assert (rc, out["code"]) == (1, 50)


def test_a_relative_agent_socket_is_code_7(agent: Agent) -> None:
    rc, out = _call(agent, ADD, _conf(agent, agentSocket="run/cni.sock"))
    assert (rc, out["code"]) == (1, 7) and "agentSocket" in out["msg"]


def test_version_is_answered_without_the_agent(agent: Agent, tmp_path: Path) -> None:
    conf = json.dumps({"cniVersion": "1.0.0", "agentSocket": str(tmp_path / "none")})
    rc, out = _call(agent, {"CNI_COMMAND": "VERSION"}, conf)
    assert rc == 0
    assert out == {"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]}


def test_0_4_0_result_has_ip_versions(agent: Agent, pods: Pods) -> None:
    name, path = pods.netns()
    env = {**ADD, "CNI_NETNS": path, "CNI_CONTAINERID": "v040test00000000000"}
    rc, out = _call(agent, env, _conf(agent, cniVersion="0.4.0"))
    pods.created[-1] = (name, env["CNI_CONTAINERID"], env["CNI_ARGS"], out)
    assert rc == 0, out
    assert out["cniVersion"] == "0.4.0" and out["ips"][0]["version"] == "4"


def test_a_namespace_switch_someone_else_made_is_not_allocated_from(agent: Agent, pods: Pods) -> None:
    """A `k8s-<ns>` switch without PrismNET's subnet: code 102, and the ADD leaves nothing."""
    agent.nbctl("ls-add", "k8s-foreign")
    try:
        netns, path = pods.netns()
        call = agent.runtime().add("f" * 32, path, args="K8S_POD_NAMESPACE=foreign;K8S_POD_NAME=p")
        assert call.rc == 1 and call.out["code"] == 102, call.out
        assert "without a PrismNET subnet" in call.out["msg"]
        assert agent.nbctl("--bare", "--columns=ports", "list", "Logical_Switch", "k8s-foreign").strip() == ""
        links = subprocess.run(["ip", "-n", netns, "-o", "link"], capture_output=True, text=True).stdout
        assert "eth0" not in links
    finally:
        agent.nbctl("--if-exists", "ls-del", "k8s-foreign")


def _raw(agent: Agent, env: dict[str, str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    exe = agent.env["PRISMNET_CNI_BIN"]
    full = {"PATH": "/usr/bin:/bin", "CNI_PATH": "/usr/lib/cni", **env}
    return subprocess.run([exe], input=stdin, env=full, capture_output=True, timeout=30)


@pytest.mark.parametrize(
    ("stdin", "code"),
    [
        (b"[" * 8_000_000, 7),  # larger than any netconf: refused before decoding
        (b"[" * 500_000, 6),  # was a RecursionError traceback with nothing on stdout
        (b'{"cniVersion": "1.0.0"} {"trailing": 1}', 6),
    ],
)
def test_pathological_stdin_is_a_cni_error_not_a_traceback(agent: Agent, stdin: bytes, code: int) -> None:
    proc = _raw(agent, ADD, stdin)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr[-500:]
    assert json.loads(proc.stdout)["code"] == code, proc.stdout


def test_empty_stdin_is_a_decode_error(agent: Agent) -> None:
    """Was code 11 "agent not reachable" on the default socket (retried forever by a runtime)."""
    assert not Path("/run/prismnet/cni.sock").exists()
    proc = _raw(agent, ADD, b"")
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == 6, proc.stdout


def test_a_wrong_agent_socket_is_refused_even_when_the_environment_names_the_agent(agent: Agent) -> None:
    """`source .run/node.env` exports PRISMNET_AGENT_SOCKET: `"agentSocket": 42` was silently ignored."""
    env = {**ADD, "PRISMNET_AGENT_SOCKET": agent.socket}
    rc, out = _call(agent, env, _conf(agent, agentSocket=42))
    assert (rc, out["code"]) == (1, 7) and "agentSocket" in out["msg"], out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (f"K8S_POD_NAMESPACE={'n' * 300};K8S_POD_NAME=p", "K8S_POD_NAMESPACE"),
        (f"K8S_POD_NAMESPACE={'n' * 64};K8S_POD_NAME=p", "K8S_POD_NAMESPACE"),
        ("K8S_POD_NAMESPACE=Upper;K8S_POD_NAME=p", "K8S_POD_NAMESPACE"),
        ("K8S_POD_NAMESPACE=a.b;K8S_POD_NAME=p", "K8S_POD_NAMESPACE"),
        (f"K8S_POD_NAMESPACE=ok;K8S_POD_NAME={'p' * 254}", "K8S_POD_NAME"),
        ("K8S_POD_NAMESPACE=ok;K8S_POD_NAME=-p", "K8S_POD_NAME"),
    ],
)
def test_names_kubernetes_never_allows_are_refused_and_nothing_is_wired(
    agent: Agent, pods: Pods, args: str, field: str
) -> None:
    """A 300-character namespace was wired (kube-apiserver never allows more than 63)."""
    _, path = pods.netns()
    rc, out = _call(agent, {**ADD, "CNI_NETNS": path, "CNI_ARGS": args}, _conf(agent))
    assert (rc, out["code"]) == (1, 4) and f"CNI_ARGS {field}" in out["msg"], out
    ports = agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port")
    assert ADD["CNI_CONTAINERID"] not in ports
    switches = agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
    assert not [s for s in switches if len(s) > 4 + 63], switches


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("POST", "/cni", b"x" * (5 * 1024 * 1024)),  # was aiohttp's plain-text "Maximum request body size"
        ("POST", "/cni", b"no framing at all"),  # was aiohttp's plain-text 500
        ("POST", "/cni", b"CNI_COMMAND=ADD\0\0" + b"[" * 200_000),  # was a 500 (RecursionError)
        ("GET", "/cni", b""),
        ("POST", "/other", b""),
    ],
)
def test_the_agent_answers_garbage_with_a_cni_error(agent: Agent, method: str, url: str, body: bytes) -> None:
    status, reply, ctype = post_to_agent(agent.socket, body, method, url)
    assert status >= 400 and ctype.startswith("application/json"), (status, reply[:200])
    out = json.loads(reply)
    assert out["code"] in (4, 6, 7) and out["msg"], out
    status_call = b"CNI_COMMAND=STATUS\0\0" + _conf(agent, cniVersion="1.1.0").encode()
    assert post_to_agent(agent.socket, status_call)[0] == 200
