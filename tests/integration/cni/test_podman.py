"""A real container runtime: Debian's podman 4.3 (CNI backend) runs the installed `prismnet` and
conflist with no PRISMNET variable anywhere, and every way a container ends leaves nothing behind.

podman sends `CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAME=<container name>` (no namespace: the pod lands
on `k8s-default`), runs VERSION before ADD/DEL, passes `portMappings` to the chained portmap,
caches each result in /var/lib/cni/results/<network>-<id>-<ifname> for its DEL, and runs that
DEL from `podman container cleanup`, a separate process started by conmon when the container
exits.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.podman_runtime import Podman, make_podman, missing_prerequisites
from nodeenv.scenario import Scenario
from nodeenv.scenarios import podman as podman_scenario
from tests.integration.cni.conftest import Agent, ping
from tests.integration.cni.test_chaining import _fetch, _node_ip, portmap_chains  # noqa: F401

CNI_CACHE = Path("/var/lib/cni/results")


@pytest.fixture(scope="module")
def podman(agent: Agent, short_tmp: Path) -> Iterator[Podman]:
    if missing := missing_prerequisites():
        pytest.fail(f"podman prerequisites missing: {', '.join(missing)}; run `make setup`")
    pm = make_podman(short_tmp / "podman", agent.node.settings.install_root, f"/k8shost-podman-{os.getpid()}")
    try:
        pm.build_image()
        yield pm
        containers = pm("ps", "-aq")  # every test removed its containers
    finally:
        pm.remove_all()
    assert not containers, f"containers left behind: {containers}"
    assert not pm.leftovers(), "podman's storage mounts or our cgroup parent remain"


def _name(tag: str) -> str:
    return f"pm{os.getpid()}-{tag}"


def _attachment(podman: Podman, name: str) -> tuple[str, str, str]:
    """(container id, its eth0 address, its network namespace path)."""
    cid = podman.inspect(name, "{{.Id}}")
    ip = podman.inspect(name, "{{.NetworkSettings.Networks.prismnet.IPAddress}}")
    netns = podman.inspect(name, "{{.NetworkSettings.SandboxKey}}")
    return cid, ip, netns


def _left_behind(agent: Agent, cid: str, ip: str, netns: str) -> list[str]:
    host_if = "pn" + hashlib.sha1(f"{cid}/eth0".encode()).hexdigest()[:11]
    ports = agent.nbctl("--bare", "--columns=name,addresses", "list", "Logical_Switch_Port")
    left = ["OVN port"] if cid in ports else []
    in_use = ports + agent.nbctl("--bare", "--columns=addresses", "list", "Address_Set")  # + egress set
    left += [f"address {ip} in OVN"] if re.search(rf"(?<![\d.]){re.escape(ip)}(?![\d.])", in_use) else []
    left += ["OVS port"] if host_if in agent.vsctl("--bare", "--columns=name", "list", "Interface") else []
    left += ["veth"] if Path(f"/sys/class/net/{host_if}").exists() else []
    left += ["netns"] if netns and Path(netns).exists() else []
    left += ["CNI cache"] if (CNI_CACHE / f"prismnet-{cid}-eth0").exists() else []
    return left


def _wait_clean(agent: Agent, att: tuple[str, str, str], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while left := _left_behind(agent, *att):
        assert time.monotonic() < deadline, f"left behind: {left}"
        time.sleep(0.1)


def test_containers_get_our_addresses_reach_each_other_and_the_node(agent: Agent, podman: Podman) -> None:
    a, b = _name("a"), _name("b")
    podman.start(a)
    podman.start(b)
    atts = {n: _attachment(podman, n) for n in (a, b)}
    conmon_env = Path(f"/proc/{podman.inspect(a, '{{.State.ConmonPid}}')}/environ").read_bytes()
    assert b"PRISMNET" not in conmon_env  # what the cleanup process inherits: no variable of ours
    for name, (cid, ip, _) in atts.items():
        # our IPAM: the address is the one on the container's OVN port (podman's K8S_POD_NAME)
        assert ip in agent.nbctl("lsp-get-addresses", f"{name}-{cid}"), name
        assert "k8s-default" in agent.nbctl("lsp-get-ls", f"{name}-{cid}")  # podman names no namespace
        assert agent.nbctl("lsp-get-up", f"{name}-{cid}").strip() == "up"
        cached = json.loads((CNI_CACHE / f"prismnet-{cid}-eth0").read_text())
        assert cached["kind"] == "cniCacheV1" and cached["config"], "podman cached the conflist for its DEL"
    podman("exec", a, "ping", "-c1", "-W2", atts[b][1])
    podman("exec", b, "ping", "-c1", "-W2", _node_ip(agent))
    ping(None, atts[a][1])  # and the node reaches them
    # rm -f: the DEL comes from podman itself
    podman("rm", "-f", "-t", "0", a)
    _wait_clean(agent, atts[a])
    # stop: conmon's `podman container cleanup` process runs the DEL; cleanup again is idempotent
    podman("stop", "-t", "0", b)
    _wait_clean(agent, atts[b])
    podman("container", "cleanup", b)
    podman("rm", b)
    assert podman("ps", "-aq") == ""


def test_a_container_named_as_podman_names_it_is_wired(agent: Agent, podman: Podman) -> None:
    """podman sends the container name as K8S_POD_NAME; its generated names (`frosty_bose`) are not
    DNS-1123 names and were refused, failing `podman run` without --name."""
    name = f"Pm{os.getpid()}_generated_Like"
    podman.start(name)
    try:
        cid, ip, _ = _attachment(podman, name)
        assert ip in agent.nbctl("lsp-get-addresses", f"{name}-{cid}")
    finally:
        podman("rm", "-f", "-t", "0", name)


def test_killed_containers_leave_nothing(agent: Agent, podman: Podman) -> None:
    k, c = _name("killed"), _name("conmon")
    podman.start(k)
    podman.start(c)
    att_k, att_c = _attachment(podman, k), _attachment(podman, c)
    os.kill(int(podman.inspect(k, "{{.State.Pid}}")), 9)  # the container's process dies
    _wait_clean(agent, att_k)
    assert podman.inspect(k, "{{.State.Status}}") == "exited"
    podman("rm", k)
    # conmon killed: nobody runs the exit command; the container is still wired until podman removes it
    os.kill(int(podman.inspect(c, "{{.State.ConmonPid}}")), 9)
    podman("rm", "-f", "-t", "0", c)
    _wait_clean(agent, att_c)


@pytest.mark.usefixtures("portmap_chains")
def test_published_port_reaches_the_container_through_portmap(agent: Agent, podman: Podman) -> None:
    name = _name("web")
    podman.start(name, "-p", "18090:80", command=("httpd", "-f", "-p", "80", "-h", "/www"))
    att = _attachment(podman, name)
    try:
        assert "hello from a podman container" in _fetch(f"http://{_node_ip(agent)}:18090/")
        nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
        assert att[0] in nat  # portmap's per-container chain (podman's portMappings reached it)
    finally:
        podman("rm", "-f", "-t", "0", name)
    _wait_clean(agent, att)
    assert att[0] not in subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout


def test_network_inspect_shows_our_network(podman: Podman, agent: Agent) -> None:
    [net] = json.loads(podman("network", "inspect", "prismnet"))
    assert (net["name"], net["driver"]) == ("prismnet", "prismnet")
    assert "prismnet" in podman("network", "ls", "--format", "{{.Name}}").split()


def test_sandbox_scenario_podman_container_pings_a_cni_pod(agent: Agent) -> None:
    scn = Scenario(agent.node)
    try:
        podman_scenario.run(scn)
    finally:
        errors = scn.run_cleanups()
    assert [r.ok for r in scn.results] == [True, True, True] and errors == [], (scn.table(), errors)
    ports = agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port")
    assert podman_scenario.CONTAINER not in ports and podman_scenario.POD not in ports
    assert not Path(f"/run/netns/{podman_scenario.POD}").exists()


def test_no_prismnet_variable_reaches_the_agent_either(agent: Agent) -> None:
    """node.env's PRISMNET_* entries are for people; the agent is configured by argv alone."""
    [rec] = [r for r in agent.node.daemons.load() if r.name == "prismnet-agent"]
    assert b"PRISMNET_" not in Path(f"/proc/{rec.pid}/environ").read_bytes()


def test_agent_down_fails_the_start_with_our_error_and_leaves_nothing(agent: Agent, podman: Podman) -> None:
    name = _name("down")
    agent.stop()
    try:
        with pytest.raises(RuntimeError) as failed:
            podman.start(name)
    finally:
        agent.restart()
    # podman shows the plugin's CNI error: the socket the conflist names, and what to start
    assert "prismnet-agent is not reachable on" in str(failed.value) and agent.socket in str(failed.value)
    assert "agentSocket" in str(failed.value)
    podman("rm", "-f", "-t", "0", name)  # created, never started
    assert not list(CNI_CACHE.glob("prismnet-*")) and podman("ps", "-aq") == ""
    assert name not in agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port")
