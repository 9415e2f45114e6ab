"""A full disk under OVN central in cluster mode (issue 29 item 5; kube-ovn #1968, #1573): a private
1-node cluster on 3-member NB/SB RAFT clusters whose files are on an ext4 filesystem of their own
(a 16 MB loop device), filled. Our writers meet it as their callers see them: a LoadBalancer
Service's load balancer cannot be written -- fiberlb-controller records a Warning Event on the
Service naming the failed transaction and counts it (`ovsdb_client_transaction_errors_total`); a pod
ADD through the node's plugin fails with CNI code 11 (try again later) and the agent counts it too.
Once space returns and the failed members are restarted on their files (the ovn-central pod's
liveness probe), the controller's retry writes the load balancer and a new ADD succeeds, with no
daemon of ours restarted; after a compaction of every member `ovsdb-tool check-cluster` passes."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nodeenv.cluster.churn import ClusterPods
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.daemons import http_get_in
from nodeenv.metrics_scrape import samples
from nodeenv.ovn_central import DATABASES, central_dir
from tests.conftest import require_ovn
from tests.integration.cluster.kube import Api, endpoint_slice, eventually, ingress, namespace, nbctl, service
from tests.integration.cluster.test_db_bounds import private_cluster
from tests.integration.nodeenv.small_fs import fill, loop_fs

NS = "fulldisk"
PORTS = [{"name": "http", "port": 80, "targetPort": 8080}]


@pytest.fixture(scope="module")
def small_fs(short_tmp: Path) -> Iterator[Path]:
    yield from loop_fs(short_tmp, "cfs", 16)


@pytest.fixture(scope="module")
def full_cluster(small_fs: Path, short_tmp: Path) -> Iterator[Cluster]:
    require_ovn()
    settings = ClusterSettings(run_dir=short_tmp / "cfd", nodes=1, prefix="k8stfd", ovn_central="raft",
                               cluster_cidr="10.88.0.0/16", underlay_cidr="10.248.0.0/24",
                               controller_replicas=1, central_db_dir=small_fs)  # fmt: skip
    yield from private_cluster(settings)


def txn_errors(cluster: Cluster, key: str) -> float:
    """ovsdb_client_transaction_errors_total{database=OVN_Northbound} of a daemon of node1 (`key`
    names its /metrics in node.env)."""
    n = cluster.nodes[0]
    _, text = http_get_in(n.netns, n.env[key], 5)
    got = [v for labels, v in samples(text).get("ovsdb_client_transaction_errors_total", [])
           if labels.get("database") == "OVN_Northbound"]  # fmt: skip
    return sum(got)


def warnings_on(api: Api, name: str) -> list[str]:
    events = api.client.list("/apis/events.k8s.io/v1", "events", NS)
    return [str(e.get("note", "")) for e in events
            if e.get("type") == "Warning" and (e.get("regarding") or {}).get("name") == name]  # fmt: skip


def check_cluster(cluster: Cluster) -> None:
    central = cluster.central_component
    for db in DATABASES:
        files = [str(m.dbfile) for m in central.member_list(central_dir(cluster.central), db)]
        out = subprocess.run(["ovsdb-tool", "check-cluster", *files], capture_output=True, text=True)
        assert out.returncode == 0, (db.name, out.stderr)


def test_writers_report_a_full_disk_and_converge_once_space_returns(
    full_cluster: Cluster, small_fs: Path
) -> None:
    cluster, node = full_cluster, full_cluster.nodes[0]
    api, pods = Api(cluster), ClusterPods(cluster, tag="f", attempts=1)
    api.create(namespace(NS))
    filler = None
    try:
        first, _ = pods.add(node, NS)
        assert first is not None
        before = {k: txn_errors(cluster, k) for k in ("FIBERLB_METRICS", "PRISMNET_METRICS")}
        pids = {r.name: r.pid for r in node.node.daemons.load()}

        filler = fill(small_fs)
        big = "external_ids:fill=" + "x" * 65536  # more than the last files' slack: a member must fail
        nbctl_failing = subprocess.run(["ovn-nbctl", f"--db={cluster.load()['OVN_NB_DB']}", "--timeout=10",
                                        "ls-add", "fill", "--", "set", "Logical_Switch", "fill", big],
                                       capture_output=True, text=True)  # fmt: skip
        assert nbctl_failing.returncode != 0, "a write went through on a full disk"
        api.create(service("web", NS, PORTS))
        api.create(endpoint_slice("web", NS, [first.ip], [{"name": "http", "port": 8080, "protocol": "TCP"}]))
        with ThreadPoolExecutor(1) as pool:  # the ADD's write waits out its retries beside fiberlb's
            started = time.monotonic()
            adding = pool.submit(pods.add, node, NS)
            notes = eventually(lambda: warnings_on(api, "web"), bool, timeout=120, every=1)
            print(f"\nWarning Event on svc/web: {notes[:1]}")
            assert any("not committed" in n for n in notes), notes
            assert txn_errors(cluster, "FIBERLB_METRICS") > before["FIBERLB_METRICS"]
            failed, outcome = adding.result()
        took = time.monotonic() - started
        print(f"pod ADD (and its DEL) on a full disk: failed after {took:.1f} s: {outcome.error[:300]}")
        assert failed is None and not outcome.ok and "took no write" in outcome.error, outcome.error
        assert txn_errors(cluster, "PRISMNET_METRICS") > before["PRISMNET_METRICS"]

        filler.unlink()
        filler = None
        freed = time.monotonic()
        restarted = cluster.central_component.restart_failed(cluster.central)
        print(f"restarted on their files: {restarted}")
        assert restarted
        # fiberlb-controller writes the Service's external IP once its load balancer is in the NB
        svc = eventually(lambda: api.get("Service", NS, "web"), lambda s: bool(ingress(s)), 120, 1)
        assert svc and ingress(svc), svc
        want = f"{ingress(svc)[0]}:80={first.ip}:8080"
        vips = eventually(lambda: nbctl(cluster, "--bare", "--columns=vips", "list", "Load_Balancer"),
                          lambda v: want in v, timeout=120, every=1)  # fmt: skip
        assert want in vips, vips
        print(f"load balancer written {time.monotonic() - freed:.1f} s after space returned")
        again, outcome = pods.add(node, NS)
        assert again is not None, outcome.error
        cluster.central_component.compact(cluster.central)
        check_cluster(cluster)
        assert not cluster.faults()
        assert {r.name: r.pid for r in node.node.daemons.load()} == pids, "a daemon of the node was restarted"
    finally:
        if filler is not None:
            filler.unlink()
        pods.delete_all()
        api.delete_all()
