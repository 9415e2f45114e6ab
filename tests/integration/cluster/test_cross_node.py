"""Pod traffic across nodes over Geneve: ICMP, TCP, UDP, the MTU edge, pod -> own node, and
concurrent ADDs on every node never handing out one address twice."""

from __future__ import annotations

import itertools
import subprocess
from concurrent.futures import ThreadPoolExecutor

from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.traffic import client, ping, serving

POD_MTU = 1400
"""1500 on the underlay minus Geneve: IPv4 20 + UDP 8 + Geneve 8 + OVN's option 8 + inner Ethernet 14."""
ICMP_PAYLOAD = POD_MTU - 20 - 8  # IP + ICMP headers


def _pairs(spread: list[Pod]) -> list[tuple[Pod, Pod]]:
    return list(itertools.permutations(spread, 2))


def test_pods_are_on_their_own_nodes(cluster: Cluster, spread: list[Pod]) -> None:
    central = read_env_file(cluster.env_file)
    for pod in spread:
        lsp = pod.lsp
        out = subprocess.run(
            [
                "ovn-sbctl",
                f"--db={central['OVN_SB_DB']}",
                "--bare",
                "--columns=chassis",
                "find",
                "Port_Binding",
                f"logical_port={lsp}",
            ],
            capture_output=True,
            text=True,
        )
        chassis = subprocess.run(
            [
                "ovn-sbctl",
                f"--db={central['OVN_SB_DB']}",
                "--bare",
                "--columns=name",
                "list",
                "Chassis",
                out.stdout.strip(),
            ],
            capture_output=True,
            text=True,
        )
        assert chassis.stdout.strip() == pod.node.name, (lsp, out.stdout, chassis.stderr)


def test_icmp_between_pods_on_every_pair_of_nodes(spread: list[Pod]) -> None:
    for src, dst in _pairs(spread):
        proc = ping(src.netns, dst.ip)
        assert proc.returncode == 0, f"{src.node.name} -> {dst.node.name}: {proc.stdout}"


def test_df_ping_of_exactly_the_pod_mtu_crosses_nodes_and_one_byte_more_fails_cleanly(
    spread: list[Pod],
) -> None:
    src, dst = spread[0], spread[1]
    fits = ping(src.netns, dst.ip, "-M", "do", "-s", str(ICMP_PAYLOAD))
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert f"{ICMP_PAYLOAD + 8} bytes from {dst.ip}" in fits.stdout
    over = ping(src.netns, dst.ip, "-M", "do", "-s", str(ICMP_PAYLOAD + 1), timeout=0)
    assert over.returncode != 0
    assert f"message too long, mtu={POD_MTU}" in over.stdout + over.stderr, over.stdout + over.stderr


def test_full_mtu_tcp_transfer_across_nodes(spread: list[Pod]) -> None:
    src, dst = spread[0], spread[2]
    with serving(dst.netns, "tcp-sink", "5201"):
        out = client(src.netns, "tcp-send", dst.ip, "5201", str(8 << 20))
    assert out["intact"] and out["bytes"] == 8 << 20, out
    # full-sized segments: MTU - IP 20 - TCP 20 - timestamps 12 (a lower MSS would hide a PMTU problem)
    assert out["mss"] == POD_MTU - 52, out
    print(
        f"pod {src.node.name} -> pod {dst.node.name}: 8 MiB TCP at {out['mbps']:.1f} MB/s, MSS {out['mss']}"
    )


def test_udp_datagram_of_full_mtu_echoes_across_nodes(spread: list[Pod]) -> None:
    src, dst = spread[1], spread[2]
    with serving(dst.netns, "udp-echo", "5202"):
        full = client(src.netns, "udp-send", dst.ip, "5202", str(POD_MTU - 28))
        over = client(src.netns, "udp-send", dst.ip, "5202", str(POD_MTU - 27))
    assert full == {"intact": True, "size": POD_MTU - 28}
    assert over == {"error": "Message too long"}


def test_every_pod_reaches_its_own_node(cluster: Cluster, spread: list[Pod]) -> None:
    """On the node's pod-network address (management port) and its own underlay address, ICMP and
    TCP to a listener in the node's namespace."""
    for pod in spread:
        node_ip = pod.node.address
        mgmt = (
            subprocess.run(
                ["ip", "-n", pod.node.netns, "-4", "-o", "addr", "show", "dev", "pnm-br-int"],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.split()[3]
            .split("/")[0]
        )
        for ip in (mgmt, node_ip):
            proc = ping(pod.netns, ip)
            assert proc.returncode == 0, f"pod on {pod.node.name} -> {ip}: {proc.stdout}"
        with serving(pod.node.netns, "tcp-sink", "5203"):
            out = client(pod.netns, "tcp-send", node_ip, "5203", str(1 << 20))
        assert out["intact"], (pod.node.name, out)


def test_concurrent_adds_on_all_nodes_never_hand_out_one_address_twice(cluster: Cluster, pods: Pods) -> None:
    per_node = 6
    jobs = [(n, i) for i in range(per_node) for n in cluster.nodes]
    with ThreadPoolExecutor(len(jobs)) as ex:
        made = list(
            ex.map(lambda job: pods.add(job[0], namespace="burst", name=f"b-{job[0].name}-{job[1]}"), jobs)
        )
    ips = [p.ip for p in made]
    assert len(set(ips)) == len(ips), sorted(ips)
    central = read_env_file(cluster.env_file)
    out = subprocess.run(
        [
            "ovn-nbctl",
            f"--db={central['OVN_NB_DB']}",
            "--format=csv",
            "--data=bare",
            "--no-headings",
            "--columns=name,addresses",
            "find",
            "Logical_Switch_Port",
            "external_ids:prismnet.namespace=burst",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    nb = {line.split(",")[0]: line.split(",")[1].split()[1] for line in out.stdout.splitlines()}
    assert nb == {p.lsp: p.ip for p in made}, "NB holds exactly the pods, each with its result's address"
    # and the addresses work across nodes: the first pod of each node reaches the next node's
    for src, dst in itertools.pairwise(made[:4]):
        assert ping(src.netns, dst.ip).returncode == 0, (src.node.name, dst.node.name)
