"""OVN central over mutual TLS only, tried as a tenant pod and as a node would: every NB and SB
member refuses a plaintext client, a TLS client without a certificate and one whose certificate
another CA signed; the nodes' own programs each present their own certificate."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography import x509

from nodeenv.cluster.cluster import Cluster
from nodeenv.daemons import is_alive
from nodeenv.node import read_env_file
from nodeenv.ovn_central import DATABASES, central_dir
from nodeenv.ovn_pki import OvnPki
from nodeenv.ovsdb_probe import Answer, client_context, list_dbs
from tests.integration.cluster.conftest import Pods


def members(cluster: Cluster) -> list[tuple[str, int]]:
    """(host, port) of every NB and SB member, as the nodes reach them."""
    env = read_env_file(cluster.env_file)
    remotes = [r for key in ("OVN_NB_DB_SSL", "OVN_SB_DB_SSL") for r in env[key].split(",")]
    assert all(r.startswith("ssl:") for r in remotes), remotes
    return [(r.split(":")[1], int(r.split(":")[2])) for r in remotes]


def pki(cluster: Cluster) -> OvnPki:
    return OvnPki(Path(read_env_file(cluster.env_file)["OVN_PKI_DIR"]))


@pytest.fixture(scope="module")
def stranger() -> Iterator[OvnPki]:
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-pki2-", dir="/tmp"))
    yield OvnPki(workdir)
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(params=["node", "pod"])
def netns(request: pytest.FixtureRequest, cluster: Cluster, pods: Pods) -> str:
    node = cluster.nodes[-1]
    return node.netns if request.param == "node" else pods.add(node, namespace="tenant-a").netns


def test_plaintext_clients_are_refused(cluster: Cluster, netns: str) -> None:
    def attempt(member: tuple[str, int]) -> tuple[subprocess.CompletedProcess[str], Answer]:
        host, port = member
        argv = ["ip", "netns", "exec", netns, "ovn-nbctl", f"--db=tcp:{host}:{port}", "--timeout=5",
                "--no-leader-only", "ls-add", "plaintext-was-here"]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return out, list_dbs(host, port, None, netns)

    targets = members(cluster)
    with ThreadPoolExecutor(len(targets)) as pool:  # a dropped SYN waits out its timeout: all at once
        for (host, port), (out, answer) in zip(targets, pool.map(attempt, targets), strict=True):
            assert out.returncode != 0, (host, port, out.stdout)
            assert answer.refused, (host, port, answer)
    nb = read_env_file(cluster.env_file)["OVN_NB_DB"]  # this namespace's unix sockets
    listed = subprocess.run(["ovn-nbctl", f"--db={nb}", "--bare", "--columns=name", "list", "Logical_Switch"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "plaintext-was-here" not in listed


def test_clients_without_a_certificate_of_the_clusters_ca_are_refused(
    cluster: Cluster, netns: str, stranger: OvnPki
) -> None:
    ca = pki(cluster).ca_cert
    foreign = stranger.issue(f"prismnet-agent-{cluster.nodes[0].name}")  # a plausible name, wrong CA
    from_node = netns == cluster.nodes[-1].netns
    tries = [(host, port, ctx) for host, port in members(cluster)
             for ctx in (client_context(ca, None), client_context(ca, foreign))]  # fmt: skip
    with ThreadPoolExecutor(len(tries)) as pool:  # a dropped SYN waits out its timeout: all at once
        answers = list(pool.map(lambda t: list_dbs(*t, netns), tries))
    for (host, port, _), answer in zip(tries, answers, strict=True):
        # from a pod the platform guard drops the SYN first (test_tenant_isolation.py), so the
        # handshake's own refusal is seen from the node; either way nothing answers
        assert answer.refused, (host, port, answer)
        if from_node:
            assert answer.error.startswith("SSL"), (host, port, answer)


def test_a_certificate_of_the_clusters_ca_is_answered_from_a_node(cluster: Cluster) -> None:
    """The probe above reaches the members and speaks OVSDB: with a certificate it gets its answer."""
    node = cluster.nodes[0]
    ctx = client_context(pki(cluster).ca_cert, pki(cluster).issue(f"probe-{node.name}"))
    for host, port in members(cluster):
        answer = list_dbs(host, port, ctx, node.netns)
        assert not answer.refused and {"OVN_Northbound", "OVN_Southbound"} & set(answer.databases), answer


def test_each_program_on_a_node_has_its_own_certificate(cluster: Cluster) -> None:
    """prismnet-agent, ovn-controller and the controller replicas each run with their own key and
    certificate (CN `<program>-<node>`), the key 0600."""
    d = pki(cluster).dir
    for n in cluster.nodes:
        programs = ["ovn-controller", "prismnet-agent"]
        if cluster.settings.runs_controllers(n.index):
            programs += ["fiberlb-controller", "netpol-controller", "node-controller"]
        for program in programs:
            key = d / f"{program}-{n.name}.key"
            assert (d / f"{program}-{n.name}.crt").exists() and oct(key.stat().st_mode)[-3:] == "600", key


def test_renewed_certificates_serve_the_next_connection_with_nothing_restarted(cluster: Cluster) -> None:
    """A NB member's and a client's certificates renewed (new keys, same CA): the member presents
    its new one on the next handshake and the client's new one is accepted, from a node, with
    every central daemon the same process."""
    p, node = pki(cluster), cluster.nodes[0]
    member = cluster.central_component.member_list(central_dir(cluster.central), DATABASES[0])[0]
    assert member.tls is not None
    pids = {r.name: r.pid for r in cluster.central.daemons.load()}
    host, port = member.listen_ip, member.port
    client = p.issue(f"rotated-{node.name}")
    before = list_dbs(host, port, client_context(p.ca_cert, client), node.netns)
    assert before.server_serial == serial(member.tls.certificate), before
    p.renew(member.tls.certificate.stem, [member.listen_ip])
    p.renew(client.certificate.stem)
    after = list_dbs(host, port, client_context(p.ca_cert, client), node.netns)
    assert not after.refused and after.server_serial == serial(member.tls.certificate) != before.server_serial
    assert {r.name: r.pid for r in cluster.central.daemons.load()} == pids, "nothing restarted"
    assert all(is_alive(r) for r in cluster.central.daemons.load())


def serial(cert: Path) -> int:
    return x509.load_pem_x509_certificate(cert.read_bytes()).serial_number
