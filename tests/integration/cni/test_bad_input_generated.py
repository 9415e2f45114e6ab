"""Generated bad input at the CNI edges (Hypothesis): the installed `prismnet` executable, as a
runtime runs it, and the agent's HTTP socket directly (for volume).

Every answer is the CNI protocol's own (exit 0 with a result or nothing; exit 1 with
`{"code", "msg"}` on stdout), never a traceback nor the internal-error code 999, the agent
keeps serving, and nothing (logical port or switch, OVS port, veth, egress address) is left.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.bad_input import ENV_TEXT, JSON_VALUES, LONG_TEXT, edge_settings, mutated
from tests.integration.cni.conftest import Agent, post_to_agent

COMMANDS = st.sampled_from(["ADD", "DEL", "CHECK", "GC", "STATUS"]) | ENV_TEXT
NAMES = st.sampled_from(["default", "ns-1", "a" * 63, ""]) | ENV_TEXT | LONG_TEXT


@st.composite
def cni_args(draw: st.DrawFn) -> str:
    pairs = {"K8S_POD_NAMESPACE": draw(NAMES), "K8S_POD_NAME": draw(NAMES)}
    pairs.update(draw(st.dictionaries(ENV_TEXT, ENV_TEXT, max_size=2)))
    text = ";".join(f"{k}={v}" for k, v in pairs.items())
    return draw(st.sampled_from([text, "IgnoreUnknown=1;" + text])) if draw(st.booleans()) else draw(ENV_TEXT)


@st.composite
def cni_env(draw: st.DrawFn) -> dict[str, str]:
    """CNI_* variables, each valid, absent or garbage; the netns never exists (nothing may be wired)."""
    env = {
        "CNI_COMMAND": draw(COMMANDS),
        "CNI_CONTAINERID": draw(st.sampled_from(["gen0000000000000000", ""]) | ENV_TEXT | LONG_TEXT),
        "CNI_IFNAME": draw(st.sampled_from(["eth0", "", "a" * 16, "a/b"]) | ENV_TEXT),
        "CNI_NETNS": draw(st.sampled_from(["/run/netns/gen-none", "", "relative"]) | ENV_TEXT),
        "CNI_ARGS": draw(cni_args()),
        "CNI_PATH": draw(st.sampled_from(["/usr/lib/cni", ""]) | ENV_TEXT),
    }
    dropped = draw(st.lists(st.sampled_from(sorted(env)), max_size=2, unique=True))
    return {k: v for k, v in env.items() if k not in dropped}


def netconfs(agent: Agent) -> st.SearchStrategy[bytes]:
    base: dict[str, Any] = {**agent.conflist["plugins"][0], "name": "prismnet", "cniVersion": "1.0.0"}  # type: ignore[index]
    keys = [*sorted(base), "prevResult", "cni.dev/valid-attachments", "mtu", "prismnetEndpoint"]
    as_json = mutated(base, keys).map(lambda d: json.dumps(d).encode())
    return st.one_of(
        as_json,
        as_json.map(lambda b: b[: len(b) // 2]),  # cut short
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=200),
        st.integers(1, 3000).map(lambda n: b"[" * n),
    )


def footprint(agent: Agent) -> dict[str, list[str]]:
    """Everything an attachment could leave: NB ports and switches, OVS ports, veths, addresses."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return {
        "NB ports": sorted(agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port").split()),
        "NB switches": sorted(agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()),
        "address sets": sorted(agent.nbctl("--bare", "--columns=addresses", "list", "Address_Set").split()),
        "OVS ports": sorted(agent.vsctl("--bare", "--columns=name", "list", "Interface").split()),
        "veths": sorted(w for w in links.split() if w.startswith("prismnet:")),
    }


def _agent_pid(agent: Agent) -> int:
    return next(r.pid for r in agent.node.daemons.load() if r.name == "prismnet-agent")


@pytest.fixture(scope="module")
def untouched(agent: Agent) -> Iterator[None]:
    """The node as it was before the module: the agent still the same process, nothing left."""
    before, pid = footprint(agent), _agent_pid(agent)
    yield
    assert _agent_pid(agent) == pid and os.path.exists(f"/proc/{pid}"), "prismnet-agent died"
    after = footprint(agent)  # GC may rightly remove stale attachments another run left: only new ones count
    created = {k: sorted(set(after[k]) - set(before[k])) for k in after if set(after[k]) - set(before[k])}
    assert not created, f"generated input left behind: {created}"


def _agent_log_tail(agent: Agent) -> str:
    return agent.node.path("prismnet", "agent.log").read_text()[-3000:]


def _check_reply(rc: int, out: bytes, err: bytes, agent: Agent | None = None) -> None:
    assert b"Traceback" not in err, err[-2000:]
    if rc == 0:
        assert out == b"" or isinstance(json.loads(out), dict), out[:300]
        return
    assert rc == 1, (rc, out[:300], err[-500:])
    reply = json.loads(out)
    assert isinstance(reply["code"], int) and isinstance(reply["msg"], str) and reply["msg"], reply
    if reply["code"] == 999:
        log = _agent_log_tail(agent) if agent else "(see prismnet-agent's log)"
        pytest.fail(f"prismnet-agent crashed on this input: {reply}\n{log}")


@pytest.mark.ovn
@edge_settings(max_examples=60)
@given(data=st.data())
def test_the_installed_plugin_answers_generated_input_in_cni_terms(
    agent: Agent, untouched: None, data: st.DataObject
) -> None:
    """Through the installed executable; PRISMNET_AGENT_SOCKET set so every call reaches the agent."""
    env = data.draw(cni_env(), "env")
    stdin = data.draw(netconfs(agent), "stdin")
    full = {"PATH": "/usr/bin:/bin", "PRISMNET_AGENT_SOCKET": agent.socket, **env}
    exe = agent.env["PRISMNET_CNI_BIN"]
    proc = subprocess.run([exe], input=stdin, env=full, capture_output=True, timeout=60)
    _check_reply(proc.returncode, proc.stdout, proc.stderr, agent)
    if env.get("CNI_COMMAND") not in (None, "", "VERSION"):
        assert proc.returncode == 1 or env["CNI_COMMAND"] in ("DEL", "GC", "STATUS"), proc.stdout


@pytest.mark.ovn
@edge_settings(max_examples=500)
@given(data=st.data())
def test_the_agent_socket_answers_generated_bodies_in_cni_terms(
    agent: Agent, untouched: None, data: st.DataObject
) -> None:
    env = data.draw(cni_env(), "env")
    stdin = data.draw(netconfs(agent), "stdin")
    items = [f"{k}={v}".encode() for k, v in env.items()]
    body = data.draw(st.sampled_from([b"\0".join([*items, b"", stdin]), stdin, b"\0".join(items)]))
    status, reply, ctype = post_to_agent(agent.socket, body)
    assert ctype.startswith("application/json"), (status, reply[:300])
    assert status != 500, json.loads(reply)
    _check_reply(0 if status == 200 else 1, reply, b"", agent)
