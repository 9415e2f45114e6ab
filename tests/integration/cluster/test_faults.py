"""Faults during a churn of pods on every node, each followed by the invariant check (issue 18
items 7 and 4), on a 3-node cluster of this module's own with OVN central as RAFT clusters.

Pods come and go on every node at once through each node's installed plugin (nodeenv/cluster/
churn.py) while one fault is injected (nodeenv/cluster/faults.py): the NB RAFT leader killed, the
SB leader killed, the active northd killed, one node's ovn-controller killed and restarted, one
node's ovs-vswitchd restarted, a whole node killed. After each: one probe pod per node (ADDed
once, never again) reaches every other node's probe, a new pod is ADDed on every node, every ADD
of the churn succeeded (a failed attempt is DELed and tried again, as kubelet does, at most
twice), every DEL succeeded, and the invariants hold (nodeenv/cluster/invariants.py). The killed
node's Node is deleted and the cluster's node-controller (its leader, on node1 or node2) releases
its state;
then a new node joins the running cluster and networks its first pod. Recovery times are printed
here and measured by `make bench BENCH=cluster`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodeenv.cli import main
from nodeenv.cluster import faults, recovery
from nodeenv.cluster.churn import Churn, ClusterPods, LivePod, cross_node_ok, wait_cross_node
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.invariants import settle
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import list_netns
from nodeenv.daemons import is_alive
from nodeenv.node import read_env_file
from nodeenv.ovn_central import Member
from tests.conftest import require_ovn

PREFIX = "k8shf"
CHURN, PROBE = "flt-churn", "flt-probe"
NAMESPACES = (CHURN, PROBE, "flt-new")


@dataclass
class Faulty:
    cluster: Cluster
    pods: ClusterPods
    probes: dict[str, LivePod]
    """node name -> its probe pod"""

    def live_probes(self) -> list[LivePod]:
        names = {n.name for n in self.cluster.nodes}
        return [p for node, p in self.probes.items() if node in names]

    def settled(self) -> None:
        """The cluster whole again (faults.not_whole) and the invariants holding."""
        faults.wait_whole(self.cluster, timeout=30)
        problems = settle(self.cluster, self.pods.pods(), NAMESPACES, timeout=30)
        assert problems == [], "\n".join(problems)


@pytest.fixture(scope="module")
def faulty(short_tmp: Path) -> Iterator[Faulty]:
    """A 3-node RAFT cluster (its own prefix: it may run beside the session's; its node-controller
    replicas on node1 and node2), a probe pod on every node."""
    require_ovn()
    settings = ClusterSettings(run_dir=short_tmp / "faults", nodes=3, prefix=PREFIX,
                               cluster_cidr="10.97.0.0/16", ovn_central="raft")  # fmt: skip
    c = Cluster(settings)
    c.up()
    pods = ClusterPods(c, tag="f")
    records = [r for part in (c.control, c.central, *(n.node for n in c.nodes)) for r in part.daemons.load()]
    try:
        probes = {}
        for n in c.nodes:
            pod, outcome = pods.add(n, PROBE, f"probe-{n.name}")
            assert pod is not None, outcome
            probes[n.name] = pod
        yield Faulty(c, pods, probes)
        assert pods.delete_all() == []
        assert settle(c, [], NAMESPACES, timeout=30) == []
    finally:
        found = c.faults()
        records += [r for n in c.nodes for r in n.node.daemons.load()]
        c.down()
        left = [r.name for r in records if is_alive(r)] + list_netns(PREFIX)
        assert not found, f"cluster daemons dead or wedged: {found}"
        assert not left, f"cluster-down left behind: {left}"


def fault_round(
    f: Faulty, what: str, inject: Callable[[Churn], float], restore: Callable[[], None], settled: bool = True
) -> None:
    """nodeenv/cluster/recovery.py's round, then: no ADD failed every attempt, every DEL succeeded,
    the invariants hold (unless not `settled`: a dead node is still to be released); the recovery
    times printed."""
    got = recovery.fault_round(f.pods, f.live_probes(), CHURN, what, inject, restore,
                               on_failure=lambda churn: _diagnose(f, churn))  # fmt: skip
    assert got.errors == [], got.errors
    assert got.failed == [], f"ADDs that failed every attempt: {got.failed}"
    if settled:
        f.settled()
    print("\n" + got.summary())


def _diagnose(f: Faulty, churn: Churn) -> None:
    """What each node was doing when a round failed: its last ADDs and its daemons' last words."""
    now = time.monotonic()
    for n in f.cluster.nodes:
        last = [o for o in f.pods.outcomes if o.node == n.name][-3:]
        print(f"{n.name}: last ADDs {[(round(o.started - now, 1), o.attempts, o.ok, o.error) for o in last]}")
        for name in ("prismnet/agent.log", "ovs/ovn-controller.log", "ovs/ovs-vswitchd.log"):
            path = n.node.run_dir / name
            tail = path.read_text(errors="replace").splitlines()[-6:] if path.exists() else []
            print(f"  {name}:\n    " + "\n    ".join(line[:300] for line in tail))
    print(f"churn errors: {churn.errors}")


@pytest.mark.parametrize("db", ["nb", "sb"])
def test_raft_leader_killed(faulty: Faulty, db: str) -> None:
    """The NB (then the SB) leader killed: another member leads, writers retry against it."""
    killed: list[Member] = []

    def inject(_: Churn) -> float:
        m, at = faults.kill_leader(faulty.cluster, db)
        killed.append(m)
        return at

    def restore() -> None:
        assert faults.leader(faulty.cluster, db) != killed[0], "no other member took over"
        faults.restart_member(faulty.cluster, killed[0])

    fault_round(faulty, f"{db.upper()} leader killed", inject, restore)


def test_active_northd_killed(faulty: Faulty) -> None:
    killed: list[str] = []

    def inject(_: Churn) -> float:
        killed.append(faults.active_northd(faulty.cluster))
        return faults.kill(faulty.cluster.central, killed[0])

    def restore() -> None:
        other = faults.active_northd(faulty.cluster)
        assert other != killed[0], "the standby did not take over"
        faults.restart_northd(faulty.cluster, killed[0])

    fault_round(faulty, "active northd killed", inject, restore)


def test_ovn_controller_killed_and_restarted(faulty: Faulty) -> None:
    """Its pods (the probe ADDed before, never again) keep or regain cross-node traffic."""
    node = faulty.cluster.nodes[1]
    while_dead: list[str] = []

    def inject(_: Churn) -> float:
        at = faults.kill(node.node, "ovn-controller")
        while_dead.extend(cross_node_ok(faulty.live_probes(), tries=3))  # its flows stay in ovs-vswitchd
        time.sleep(2)  # ADDs on it wait for ovn-installed meanwhile
        faults.restart_ovn_controller(node)
        return at

    fault_round(faulty, f"ovn-controller of {node.name} killed 2 s", inject, lambda: None)
    assert while_dead == [], f"pod pairs that lost traffic while ovn-controller was dead: {while_dead}"


def test_ovs_vswitchd_restarted(faulty: Faulty) -> None:
    node = faulty.cluster.nodes[2]
    what = f"ovs-vswitchd of {node.name} restarted"
    fault_round(faulty, what, lambda _: faults.restart_vswitchd(faulty.cluster, node), lambda: None)


def test_whole_node_killed_released_then_a_new_node_joins(faulty: Faulty) -> None:
    """The others keep working; its Node deleted, the node-controller releases its state; a node
    joining the running cluster networks its first pod and reaches every other node's pods."""
    c, victim = faulty.cluster, faulty.cluster.nodes[2]

    def inject(churn: Churn) -> float:
        churn.halt(victim.name)
        return faults.kill_node(victim)

    fault_round(faulty, f"{victim.name} killed (the others)", inject, lambda: None, settled=False)
    gone = faulty.pods.drop_node(victim.name)
    del faulty.probes[victim.name]
    released_s = recovery.release(c, victim, faulty.pods, NAMESPACES)
    faulty.settled()  # its ports, addresses, management port, egress set and chassis released
    print(f"{victim.name} had {len(gone)} pods; released {released_s:.2f} s after its Node was deleted")

    t0 = time.monotonic()
    new = c.join()
    joined = time.monotonic() - t0
    pod, outcome = faulty.pods.add(new, "flt-new", "first-on-new")
    assert pod is not None, outcome
    assert outcome.attempts == 1, outcome
    faulty.probes[new.name] = pod
    wait_cross_node(faulty.live_probes(), time.monotonic(), timeout=30)
    assert [n.name for n in c.nodes] == ["node1", "node2", "node3"]  # N+1 of the two left
    faulty.settled()
    print(f"{new.name} joined the running cluster in {joined:.1f} s; first pod ADDed in {outcome.ms:.0f} ms")


def test_concurrent_adds_on_all_nodes_never_hand_out_one_address_twice(faulty: Faulty) -> None:
    """Item 4: many ADDs at the same moment on every node (the joined one too) into the same
    namespaces, then the invariant check (unique addresses, each in NB, nothing leaked)."""
    jobs = [(n, ns) for ns in ("flt-new", CHURN) for n in faulty.cluster.nodes for _ in range(5)]
    with ThreadPoolExecutor(len(jobs)) as ex:
        made = list(ex.map(lambda job: faulty.pods.add(job[0], job[1]), jobs))
    assert [o for p, o in made if p is None] == []
    ips = [p.ip for p, _ in made if p is not None]
    assert len(set(ips)) == len(ips) == len(jobs), sorted(ips)
    faulty.settled()
    for p, _ in made:
        assert p is not None and faulty.pods.delete(
            p, next(n for n in faulty.cluster.nodes if n.name == p.node)
        )
    faulty.settled()


def test_cluster_join_command_adds_node_n_plus_1_to_the_running_cluster(
    faulty: Faulty, capsys: pytest.CaptureFixture[str]
) -> None:
    """`k8shost-node cluster-join` (a fresh process's view of the cluster, from its flags alone):
    node4 joins, its first pod reaches every other node's probe, the invariants hold with it."""
    c, s = faulty.cluster, faulty.cluster.settings
    argv = ["cluster-join", "--cluster-dir", str(s.run_dir), "--prefix", s.prefix, "--nodes", str(s.nodes),
            "--ovn-central", s.ovn_central, "--cluster-cidr", s.cluster_cidr]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "node4 joined in" in out and "the cluster has node1, node2, node3, node4" in out, out
    new = c.new_node(4)
    new.node.endpoints = read_env_file(new.env_file)
    c.nodes.append(new)
    pod, outcome = faulty.pods.add(new, "flt-new", "first-on-node4")
    assert pod is not None, outcome
    faulty.probes[new.name] = pod
    wait_cross_node(faulty.live_probes(), time.monotonic(), timeout=30)
    faulty.settled()


def test_a_restarted_daemon_is_a_fault_no_more(faulty: Faulty) -> None:
    """The restarts put every daemon back: the cluster's own check finds nothing dead or wedged."""
    assert faulty.cluster.faults() == []
