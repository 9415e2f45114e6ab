"""Every daemon of the cluster killed at once and started again, pods kept (issue 29 item 2a), on a
3-node cluster of this module's own with OVN central as RAFT clusters.

Before: a probe pod on every node, a LoadBalancer Service backed by pods on node2 and node3, its
name resolving at every node's DNS listener. Then nodeenv/cluster/coldrestart.py SIGKILLs every
daemon (all but the API double, whose state a k3s restart keeps in its datastore) and starts each
again as it ran. After: the time from the kill until pods talk across nodes, reach the Service's
LoadBalancer IP and ClusterIP, and resolve its name is printed; and nothing changed or leaked: the
same RAFT clusters (cluster ids, from their files), the same chassis rows (not re-registered),
every pod's port, address and binding as before (no duplicate), the same OVS interfaces on every
node, the same LoadBalancer IP, and a new pod on every node gets an address no pod holds (the IPAM
state read back from the NB, not handed out again).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from nodeenv.cluster import faults
from nodeenv.cluster.churn import ClusterPods, LivePod, cross_node_ok
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.coldrestart import KEEP, cold_restart
from nodeenv.cluster.invariants import Row, rows, settle
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import list_netns
from nodeenv.daemons import is_alive
from nodeenv.node import read_env_file
from nodeenv.ovn_central import DATABASES, central_dir, cluster_status
from tests.conftest import require_ovn
from tests.integration.cluster.kube import Api, endpoint_slice, eventually, ingress, namespace, service
from tests.integration.controllers.fiberlb.netns_traffic import Servers, requests

PREFIX = "k8shr"
PROBE, WEB, NEW = "cr-probe", "cr-web", "cr-new"
NAMESPACES = (PROBE, WEB, NEW)
HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
CLUSTER_DNS = "10.96.0.10"


@dataclass
class Restarted:
    cluster: Cluster
    pods: ClusterPods
    probes: list[LivePod]
    backends: list[LivePod]
    lb_ip: str
    cluster_ip: str


@pytest.fixture(scope="module")
def restarted(short_tmp: Path) -> Iterator[Restarted]:
    require_ovn()
    settings = ClusterSettings(run_dir=short_tmp / "coldrestart", nodes=3, prefix=PREFIX,
                               cluster_cidr="10.95.0.0/16", ovn_central="raft", api_data=True)  # fmt: skip
    c = Cluster(settings)
    c.up()
    pods, servers = ClusterPods(c, tag="r"), Servers()
    api = Api(c)
    records = [r for part in (c.control, c.central, *(n.node for n in c.nodes)) for r in part.daemons.load()]
    try:
        probes = [_added(pods, n, PROBE, f"probe-{n.name}") for n in c.nodes]
        backends = [_added(pods, n, WEB, f"web-{n.name}") for n in c.nodes[1:]]
        for b in backends:
            servers.start(b.netns, b.ref.name, 8080)
        api.create(namespace(WEB))
        api.create(service("web", WEB, [HTTP]))
        slice_ports = [{"name": "http", "port": 8080, "protocol": "TCP"}]
        api.create(endpoint_slice("web", WEB, sorted(b.ip for b in backends), slice_ports))
        svc = eventually(lambda: api.get("Service", WEB, "web"), lambda s: bool(s and ingress(s)))
        assert svc and ingress(svc), f"fiberlb-controller gave the Service no external IP: {svc}"
        yield Restarted(c, pods, probes, backends, ingress(svc)[0], svc["spec"]["clusterIP"])
        servers.stop()
        assert pods.delete_all() == []
        api.delete_all()
        assert settle(c, [], NAMESPACES, timeout=30) == []
    finally:
        servers.stop()
        found = c.faults()
        records += [
            r for part in (c.control, c.central, *(n.node for n in c.nodes)) for r in part.daemons.load()
        ]
        c.down()
        left = [r.name for r in records if is_alive(r)] + list_netns(PREFIX)
        assert not found, f"cluster daemons dead or wedged: {found}"
        assert not left, f"cluster-down left behind: {left}"


def _added(pods: ClusterPods, node: object, ns: str, name: str = "") -> LivePod:
    pod, outcome = pods.add(node, ns, name)  # type: ignore[arg-type]
    assert pod is not None, outcome
    return pod


@dataclass
class State:
    """What must be the same after the restart as before it."""

    cluster_ids: dict[str, str]
    chassis: list[Row]
    ports: dict[str, list[str]]
    """LSP name -> its addresses"""
    bindings: list[str]
    interfaces: dict[str, list[str]]
    """node -> its OVS interfaces' names"""

    @classmethod
    def read(cls, c: Cluster) -> State:
        env = read_env_file(c.env_file)
        nb, sb = env["OVN_NB_DB"], env["OVN_SB_DB"]
        ids = {}
        for db in DATABASES:
            m = c.central_component.member_list(central_dir(c.central), db)[0]
            ids[db.name] = cluster_status(m.ctl, db.name).get("Cluster ID", "")
        lsps = rows("ovn-nbctl", nb, "Logical_Switch_Port", ["name", "addresses"])
        ovs = {}
        for n in c.nodes:
            ovs_db = f"unix:{n.node.run_dir / 'ovs' / 'ovs.sock'}"
            ovs[n.name] = sorted(i["name"] for i in rows("ovs-vsctl", ovs_db, "Interface", ["name"]))
        return cls(
            cluster_ids=ids,
            chassis=sorted(rows("ovn-sbctl", sb, "Chassis", ["_uuid", "name"]), key=lambda r: r["name"]),
            ports={
                p["name"]: sorted(p["addresses"] if isinstance(p["addresses"], list) else [p["addresses"]])
                for p in lsps
            },
            bindings=sorted(
                b["logical_port"] for b in rows("ovn-sbctl", sb, "Port_Binding", ["logical_port"])
            ),
            interfaces=ovs,
        )


def _seconds_until(what: str, ok: Callable[[], bool], since: float, timeout: float = 90.0) -> float:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not working {timeout:.0f} s on")
        time.sleep(0.1)
    return time.monotonic() - since


def _dig(netns: str, name: str) -> list[str]:
    argv = ["ip", "netns", "exec", netns, "dig", "+short", "+time=1", "+tries=1", f"@{CLUSTER_DNS}", name]
    return sorted(subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.split())


def _vips_answer(r: Restarted, lb_ip: str, cluster_ip: str) -> bool:
    backends = {b.ref.name for b in r.backends}
    return all(set(requests(p.netns, vip, 80, 12, "tcp")) == backends
               for p in r.probes for vip in (lb_ip, cluster_ip))  # fmt: skip


def _dns_answers(r: Restarted, svc: str, lb_ip: str, cluster_ip: str) -> bool:
    name = f"{svc}.{WEB}.svc.cluster.local"
    return all(_dig(p.netns, name) == sorted([cluster_ip, lb_ip]) for p in r.probes)


def _iam_token_accepted(c: Cluster) -> bool:
    """A token minted by PlasmaCloud IAM (the dev signing key) is authenticated by the API double
    through the IAM webhook (a refused one is 401 Unauthorized; RBAC may still forbid: 403)."""
    mint = [
        sys.executable,
        "-m",
        "webhook.main",
        "mint",
        "--sub",
        "cold-restart",
        "--org",
        "o",
        "--project",
        "p",
    ]
    token = subprocess.run(mint, capture_output=True, text=True, env=c.control.process_env(), timeout=30)
    assert token.returncode == 0, token.stderr
    kubeconfig = read_env_file(c.env_file)["KUBECONFIG"]
    out = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", "--token", token.stdout.strip(),
                          "--request-timeout=10s", "get", "--raw", "/api"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return "Unauthorized" not in out.stderr and (out.returncode == 0 or "Forbidden" in out.stderr)


def restart_round(r: Restarted, keep: Collection[str]) -> float:
    """cold_restart(keep) with everything measured and compared (see the module doc); the time
    of the kill."""
    c = r.cluster
    vips, dns = (
        partial(_vips_answer, r, r.lb_ip, r.cluster_ip),
        partial(_dns_answers, r, "web", r.lb_ip, r.cluster_ip),
    )
    now = time.monotonic()  # (a pod may see one backend only in a round of requests: asked until both)
    across = lambda: cross_node_ok(r.probes) == []  # noqa: E731
    iam = partial(_iam_token_accepted, c)
    for what, ok in (("pods across nodes", across), ("VIPs", vips), ("DNS", dns), ("IAM tokens", iam)):
        _seconds_until(f"{what} before the restart", ok, now, timeout=30)
    assert settle(c, r.pods.pods(), NAMESPACES, timeout=30) == []
    before = State.read(c)

    got = cold_restart(c, keep)
    print(
        f"\nkilled {len(got.killed)} daemons at once (kept: {', '.join(keep) or 'none'}); all started again "
        f"and alive 3 s {got.started_s:.1f} s after the kill ({got.restarts} restarted after exiting early)"
    )
    assert len(got.killed) >= 3 * 6 + 6, got.killed  # every node's ~8 + central's NB/SB members and northds
    assert [k for k in got.killed if k.split("/")[1] in keep] == []
    quick = ClusterPods(c, tag="q", attempts=1)  # as soon as the restart is done: the runtime's calls served
    for n in c.nodes:
        pod, outcome = quick.add(n, PROBE)  # its switch exists: nothing new stays in the NB
        assert pod is not None, f"ADD on {n.name} right after the restart: {outcome.error}"
    assert quick.delete_all() == [], "a DEL right after the restart failed"
    times = {"a pod ADDed and DELed on every node": time.monotonic() - got.at}
    faults.wait_whole(c, timeout=90)
    times["OVN whole (RAFT leaders, northd, every ovn-controller)"] = time.monotonic() - got.at
    times["pods across nodes"] = _seconds_until("cross-node traffic", lambda: cross_node_ok(r.probes) == [],
                                                got.at)  # fmt: skip
    times["LoadBalancer IP and ClusterIP from every node's pod"] = _seconds_until("the VIPs", vips, got.at)
    times["DNS from every node's pod"] = _seconds_until("DNS", dns, got.at)
    times["an IAM token through the webhook"] = _seconds_until("IAM tokens", partial(_iam_token_accepted, c),
                                                               got.at)  # fmt: skip
    for what, s in times.items():
        print(f"  {what}: back {s:.1f} s after the kill")

    assert settle(c, r.pods.pods(), NAMESPACES, timeout=30) == []
    after = State.read(c)
    assert after.cluster_ids == before.cluster_ids, "a RAFT cluster was made anew, not read from its files"
    assert after.chassis == before.chassis, "chassis re-registered or duplicated"
    assert after.ports == before.ports, "pod ports or addresses changed"
    assert [p for p, k in Counter(after.bindings).items() if k > 1] == [], "duplicate port bindings"
    assert after.bindings == before.bindings
    assert after.interfaces == before.interfaces, "OVS interfaces added or lost"
    svc = Api(c).get("Service", WEB, "web")
    assert ingress(svc) == [r.lb_ip], f"LoadBalancer IP changed: {ingress(svc)} (was {r.lb_ip})"

    held = {ip for addrs in after.ports.values() for a in addrs for ip in a.split()[1:]}
    new = [_added(r.pods, n, NEW) for n in c.nodes]
    assert not {p.ip for p in new} & held, "a new pod got an address a pod already holds"
    assert settle(c, r.pods.pods(), NAMESPACES, timeout=30) == []
    return got.at


def test_every_daemon_but_the_api_killed_at_once_comes_back_with_pods_kept(restarted: Restarted) -> None:
    """As a k3s restart: the API's state stays (in its datastore), every other daemon dies."""
    restart_round(restarted, KEEP)


def test_the_api_double_too_comes_back_from_its_data_dir_and_controllers_relist(restarted: Restarted) -> None:
    """Every daemon, the API double too (its objects read back from --data-dir): the same Service
    (uid, LoadBalancer IP); the controllers' and DNS listeners' watches resume (or relist on 410
    Gone): a Service created after the restart gets its external IP, its load balancer and its name."""
    api = Api(restarted.cluster)
    uid = (api.get("Service", WEB, "web") or {})["metadata"]["uid"]
    at = restart_round(restarted, ())
    api = Api(restarted.cluster)
    assert (api.get("Service", WEB, "web") or {})["metadata"]["uid"] == uid
    api.create(service("late", WEB, [HTTP]))
    ports = [{"name": "http", "port": 8080, "protocol": "TCP"}]
    api.create(endpoint_slice("late", WEB, sorted(b.ip for b in restarted.backends), ports))
    svc = eventually(lambda: api.get("Service", WEB, "late"), lambda s: bool(s and ingress(s)), timeout=30)
    assert svc and ingress(svc), f"fiberlb-controller gave the new Service no external IP: {svc}"
    lb_ip, cluster_ip = ingress(svc)[0], svc["spec"]["clusterIP"]
    assert lb_ip != restarted.lb_ip and cluster_ip != restarted.cluster_ip, "an address handed out twice"
    t0 = time.monotonic()
    served = _seconds_until("the new Service's VIPs", partial(_vips_answer, restarted, lb_ip, cluster_ip), t0)
    named = _seconds_until(
        "the new Service's name", partial(_dns_answers, restarted, "late", lb_ip, cluster_ip), t0
    )
    print(
        f"  a Service created {t0 - at:.1f} s after the kill: "
        f"served {served:.1f} s, resolved {named:.1f} s later"
    )
    api.delete("EndpointSlice", WEB, "late-a")
    api.delete("Service", WEB, "late")
