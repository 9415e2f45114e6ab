"""A rolling upgrade under traffic, the short form of `make bench BENCH=upgrade` (which rolls every
workload of ours, ~15 min here: too long for make test): a 3-node boot of its own (prefix k8sug), the
image under a second tag (`python -m nodeenv.image retag`), the bench's traffic (TCP streams from a
pod on node1 to pods on node2/node3 directly, through a ClusterIP and a LoadBalancer; DNS every
100 ms; a volume written every second; new pods), then prismnet-agent (a DaemonSet) and ovn-central
(the StatefulSet, member by member) rolled to the new tag with `kubectl set image` and `kubectl
rollout status`.

Asserted: both rollouts complete and every pod runs the new image; during both no stream resets
(the agent only wires new pods and the datapath does not depend on the databases: running pods'
traffic is OVS's), no churn pod's ADD fails, and the volume's writes never stall 1 s. DNS failures
and stream stalls are printed, not asserted: on this shared machine (load average 30-40 in the
first runs) one query of the ~2,000 sent in each window failed twice, none in the baseline."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.bench_upgrade import SYSTEM, Cluster, run
from nodeenv.image.build import image_name
from nodeenv.image.retag import main as retag
from nodeenv.image.retag import tagged
from tests.integration.kubelet.boot_session import booted_cluster

pytestmark = pytest.mark.timeout(1200)  # the second tag, a boot of its own and two rollouts: ~5 min quiet

PREFIX = "k8sug"
TAG = "0.1.1-test"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    assert retag(TAG) == 0, "the second tag could not be built"
    with booted_cluster(PREFIX) as b:
        yield Cluster(b.run_dir)


def test_prismnet_agent_and_ovn_central_roll_to_a_new_tag_under_traffic(cluster: Cluster) -> None:
    order = ("daemonset/prismnet-agent", "statefulset/ovn-central")
    rows = {r["component"]: r for r in run(cluster, image_name(), tagged(TAG), order, baseline=5)}
    assert set(rows) == {"baseline", *order}, rows
    for workload in order:
        pods = cluster.get("-n", SYSTEM, "pods", "-l", f"app.kubernetes.io/name={workload.split('/')[1]}")
        images = {c["image"] for p in pods["items"] for c in p["spec"]["containers"]}
        assert images == {tagged(TAG)}, (workload, images)
        assert len(pods["items"]) == 3, workload
    agent, central = rows["daemonset/prismnet-agent"], rows["statefulset/ovn-central"]
    assert agent["resets"] == 0 and central["resets"] == 0, rows
    assert agent["add_failures"] == 0 and central["add_failures"] == 0, rows
    assert max(agent["write_stall_s"], central["write_stall_s"]) < 1.0, rows
