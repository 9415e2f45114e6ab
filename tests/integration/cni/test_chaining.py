"""Delegated host-local IPAM, Debian's portmap chained after prismnet, egress masquerade."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.portmap_chains import nat_chains, remove_new_chains
from tests.integration.cni.conftest import Agent, Pods, ping, pod_ip


def _host_local_conflist(data_dir: Path, agent_socket: str) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "prismnet",
        "plugins": [
            {
                "type": "prismnet",
                "agentSocket": agent_socket,
                "mtu": 1400,
                "ipam": {
                    "type": "host-local",
                    "subnet": "10.98.0.0/24",
                    "gateway": "10.98.0.1",
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(data_dir),
                },
            }
        ],
    }


def test_delegated_host_local_ipam(agent: Agent, pods: Pods, tmp_path: Path) -> None:
    rt = agent.runtime(_host_local_conflist(tmp_path, agent.socket))
    results = []
    for i in range(2):
        name, path = pods.netns()
        cid = f"hl{os.getpid()}x{i}" + "0" * 16
        args = f"K8S_POD_NAMESPACE=hostlocal;K8S_POD_NAME=h{i}"
        call = rt.add(cid, path, args=args)
        assert call.rc == 0, call.out
        pods.created[-1] = (name, cid, args, call.out)
        results.append((name, cid, args, call.out))
    ips = [pod_ip(r[3]) for r in results]
    assert all(ip.startswith("10.98.0.") for ip in ips) and ips[0] != ips[1]
    held = {p.name for p in (tmp_path / "prismnet").iterdir() if p.name[0].isdigit()}
    assert held == set(ips)  # host-local's own reservations
    assert ips[0] in agent.nbctl("lsp-get-addresses", f"h0-{results[0][1]}")
    ping(results[0][0], ips[1])
    for name, cid, args, out in results:
        assert rt.delete(cid, f"/run/netns/{name}", out, args=args).rc == 0
    assert {p.name for p in (tmp_path / "prismnet").iterdir() if p.name[0].isdigit()} == set()


def _node_ip(agent: Agent) -> str:
    """A local address of the node (its management port's): hostPort DNAT applies to any."""
    dev = agent.component.settings(agent.node).management_if
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", dev], capture_output=True, text=True)
    words = out.stdout.split()
    return words[words.index("inet") + 1].split("/")[0]


@pytest.fixture
def http_server() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.terminate()
        p.wait(5)


def _fetch(url: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(
            [
                "python3",
                "-c",
                f"import urllib.request;print(urllib.request.urlopen('{url}',timeout=2).read().decode())",
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return proc.stdout
        assert time.monotonic() < deadline, proc.stderr
        time.sleep(0.2)


@pytest.fixture
def portmap_chains() -> Iterator[None]:
    before = nat_chains()
    yield
    remove_new_chains(before)


@pytest.mark.usefixtures("portmap_chains")
def test_portmap_chained_after_prismnet(
    agent: Agent, pods: Pods, tmp_path: Path, http_server: list[subprocess.Popen[bytes]]
) -> None:
    conflist = {
        **agent.conflist,
        "plugins": [
            agent.conflist["plugins"][0],
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    rt = agent.runtime(conflist)
    name, path = pods.netns()
    cid = f"pm{os.getpid()}" + "0" * 20
    args = "K8S_POD_NAMESPACE=portmap;K8S_POD_NAME=pm"
    mapping = {"portMappings": [{"hostPort": 18089, "containerPort": 8080, "protocol": "tcp"}]}
    call = rt.add(cid, path, args=args, runtime_config=mapping)
    assert call.rc == 0, (call.out, call.stderr)
    (tmp_path / "index.html").write_text("hello from the pod\n")
    http_server.append(
        subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                name,
                "python3",
                "-m",
                "http.server",
                "8080",
                "--directory",
                str(tmp_path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    assert "hello from the pod" in _fetch(f"http://{_node_ip(agent)}:18089/")
    # our CHECK against the chain's final result (Debian's portmap 1.1.1 CHECK itself fails on a
    # missing ipv6 chain whatever the first plugin is, so only ours is asserted)
    env = {
        "CNI_COMMAND": "CHECK",
        "CNI_CONTAINERID": cid,
        "CNI_NETNS": path,
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": args,
    }
    conf = {**conflist["plugins"][0], "name": "prismnet", "cniVersion": "1.0.0", "prevResult": call.out}
    assert rt.exec("prismnet", env, conf).rc == 0
    assert cid in subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    dele = rt.delete(cid, path, call.out, args=args, runtime_config=mapping)
    assert dele.rc == 0, dele.out
    pods.created[-1] = (name, "", "", {})
    assert cid not in subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout


@pytest.fixture
def outside() -> Iterator[tuple[str, str, str]]:
    """A netns standing for the world beyond the node: 192.168.251.2, reached via the node's 192.168.251.1."""
    ns = f"cnio-{os.getpid()}"
    cmds = [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", "cnio-host", "type", "veth", "peer", "name", "eth0", "netns", ns],
        ["ip", "addr", "add", "192.168.251.1/30", "dev", "cnio-host"],
        ["ip", "link", "set", "cnio-host", "up"],
        ["ip", "-n", ns, "addr", "add", "192.168.251.2/30", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
    ]
    fwd = Path("/proc/sys/net/ipv4/conf/cnio-host/forwarding")
    try:
        for c in cmds:
            subprocess.run(c, check=True, capture_output=True)
        fwd.write_text("1")
        yield ns, "192.168.251.2", "192.168.251.1"
    finally:
        subprocess.run(["ip", "link", "del", "cnio-host"], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_egress_is_masqueraded_by_the_node(agent: Agent, pods: Pods, outside: tuple[str, str, str]) -> None:
    ns, world_ip, node_side = outside
    name, _, _ = pods.add("egress", "out")
    ping(name, world_ip)
    # the outside netns has no route to the pod network: the reply only arrives because of masquerade
    assert "10.99." not in subprocess.run(["ip", "-n", ns, "route"], capture_output=True, text=True).stdout
    conntrack = Path("/proc/net/nf_conntrack")
    if conntrack.exists():
        assert node_side in conntrack.read_text()
