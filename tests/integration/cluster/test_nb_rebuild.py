"""The NB lost on every member and rebuilt from the API and the nodes' own state (issue 29 item 4),
on a 3-node RAFT cluster of this module's own (prefix k8snb).

Project-like namespaces nbr-a and nbr-b; nbr-b admits ingress from its own namespace only (a
NetworkPolicy); b1 (node2) serves TCP 8080 behind a LoadBalancer Service. While pods run, every
NB member is stopped, its file deleted and a new empty clustered NB made on the same RAFT addresses
(nodeenv/cluster/db_wipe.py). Meanwhile a1 (nbr-a, node1) probes b1 every few ms: it must never
get through (pods come back held, released with their policies). After: every pod reachable again
at the same address, the Service on the same ClusterIP and LB IP, the policy refusing what it
refused, the NB holding the same switches (subnets), ports (addresses), load balancers (VIPs) and
as many port groups, ACLs and address sets as before, nothing twice, nothing held. The SB lost
the same way: northd writes it again from the NB, ovn-controllers register their chassis again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodeenv.cluster import db_wipe, faults
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.daemons import run_checked
from nodeenv.node import read_env_file
from tests.conftest import require_ovn
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import (
    Api,
    endpoint_slice,
    eventually,
    ingress,
    namespace,
    nbctl,
    pod_object,
)
from tests.integration.controllers.netpol.traffic import EchoServers, reaches

PREFIX = "k8snb"
A, B = "nbr-a", "nbr-b"
PORT = 8080
SAME_NAMESPACE_ONLY = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "same-namespace", "namespace": B},
    "spec": {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]},
}


@dataclass
class World:
    cluster: Cluster
    pods: dict[str, Pod]
    lb_ip: str
    cluster_ip: str
    servers: list[EchoServers] = field(default_factory=list)

    def allowed(self) -> dict[str, bool]:
        """Every path that must work: inside each namespace across nodes, and the Service."""
        p = self.pods
        return {
            "b2->b1": reaches(p["b2"].netns, p["b1"].ip, "tcp", PORT),
            "a2->a1": reaches(p["a2"].netns, p["a1"].ip, "tcp", PORT),
            "b2->lb": reaches(p["b2"].netns, self.lb_ip, "tcp", PORT),
            "b2->clusterip": reaches(p["b2"].netns, self.cluster_ip, "tcp", PORT),
        }

    def refused(self) -> bool:
        return not reaches(self.pods["a1"].netns, self.pods["b1"].ip, "tcp", PORT, timeout=0.3)


@pytest.fixture(scope="module")
def world(short_tmp: Path) -> Iterator[World]:
    require_ovn()
    settings = ClusterSettings(run_dir=short_tmp / "nbrebuild", nodes=3, prefix=PREFIX,
                               cluster_cidr="10.95.0.0/16", ovn_central="raft")  # fmt: skip
    c = Cluster(settings)
    c.up()
    api, pods, servers = Api(c), Pods([]), []
    n1, n2, n3 = c.nodes
    try:
        api.create(namespace(A))
        api.create(namespace(B))
        made = {}
        for name, ns, node in (("a1", A, n1), ("a2", A, n3), ("b1", B, n2), ("b2", B, n3)):
            made[name] = pod = pods.add(node, namespace=ns, name=name)
            api.create(pod_object(pod, {"app": "web" if name == "b1" else name}))
        servers = [EchoServers(made[n].netns, (PORT,), ()) for n in ("a1", "b1")]
        api.create(SAME_NAMESPACE_ONLY)
        ports = [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}]
        spec = {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": ports}
        api.create(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": B}, "spec": spec}
        )
        api.create(
            endpoint_slice("web", B, [made["b1"].ip], [{"name": "http", "port": PORT, "protocol": "TCP"}])
        )
        svc = eventually(lambda: api.get("Service", B, "web"), lambda s: bool(s and ingress(s)), timeout=30)
        assert svc and ingress(svc), f"no external IP for svc/web: {svc}"
        w = World(c, made, ingress(svc)[0], svc["spec"]["clusterIP"], servers)
        ok = eventually(w.allowed, lambda r: all(r.values()), timeout=30)
        assert all(ok.values()), ok
        assert eventually(w.refused, bool, timeout=20), "nbr-b's policy does not refuse a1 before the wipe"
        yield w
    finally:
        for s in servers:
            s.close()
        pods.delete_all()
        api.delete_all()
        c.down()


def nb_state(c: Cluster) -> dict[str, object]:
    """What the suite wrote into the NB, by name (comparable across a rebuild: no UUIDs)."""

    def rows(table: str, columns: str) -> list[dict[str, Any]]:
        out = json.loads(nbctl(c, "--format=json", "--data=json", f"--columns={columns}", "list", table))
        return [dict(zip(out["headings"], r, strict=True)) for r in out["data"]]

    def names(table: str) -> list[str]:
        return sorted(str(r["name"]) for r in rows(table, "name"))

    return {
        "switches": sorted(  # subnet and gateway; not which agent made it (the first to write it again)
            json.dumps(
                [r["name"], r["other_config"], {k: v for k, v in r["external_ids"][1] if "owner" not in k}]
            )
            for r in rows("Logical_Switch", "name,external_ids,other_config")
        ),
        "ports": sorted(
            json.dumps([r["name"], r["addresses"], r["enabled"]])
            for r in rows("Logical_Switch_Port", "name,addresses,enabled")
        ),
        "routers": names("Logical_Router"),
        "router_ports": sorted(
            json.dumps([r["name"], r["networks"]]) for r in rows("Logical_Router_Port", "name,networks")
        ),
        "load_balancers": sorted(
            json.dumps([r["name"], r["vips"]]) for r in rows("Load_Balancer", "name,vips")
        ),
        "port_groups": names("Port_Group"),
        "address_sets": sorted(
            json.dumps([r["name"], r["addresses"]]) for r in rows("Address_Set", "name,addresses")
        ),
        "acls": len(rows("ACL", "match")),
        "meters": names("Meter"),
        "policies": len(rows("Logical_Router_Policy", "match")),
        "routes": len(rows("Logical_Router_Static_Route", "ip_prefix")),
    }


class Prober(threading.Thread):
    """a1 -> b1 (refused by nbr-b's policy) as often as it can, until stopped."""

    def __init__(self, w: World) -> None:
        super().__init__(daemon=True)
        self.w, self.tries, self.through, self.halt = w, 0, 0, threading.Event()

    def run(self) -> None:
        src, dst = self.w.pods["a1"].netns, self.w.pods["b1"].ip
        while not self.halt.is_set():
            self.tries += 1
            self.through += reaches(src, dst, "tcp", PORT, timeout=0.05)
            time.sleep(0.005)


def test_nb_wiped_is_rebuilt_with_no_isolation_gap(world: World) -> None:
    c = world.cluster
    before = nb_state(c)
    prober = Prober(world)
    prober.start()
    try:
        cid = nb_cid(c)
        wiped_at = db_wipe.wipe(c, "nb")
        assert nb_cid(c) != cid, "the NB is the same cluster as before the wipe"
        after = eventually(lambda: nb_state(c), lambda s: s == before, timeout=90, every=0.1)
        in_nb = time.monotonic() - wiped_at
        in_effect_everywhere(c)
        in_effect = time.monotonic() - wiped_at
        back = eventually(world.allowed, lambda r: all(r.values()), timeout=60, every=0.05)
        reachable = time.monotonic() - wiped_at
        time.sleep(2.0)  # the prober keeps probing the settled cluster too
    finally:
        prober.halt.set()
        prober.join()
    print(
        f"\nNB wiped -> rebuilt in the NB: {in_nb:.2f} s, in effect on every chassis: {in_effect:.2f} s, "
        f"every pod and the Service reachable: {reachable:.2f} s; a1 -> b1 (refused by policy) during it: "
        f"{prober.through} of {prober.tries} "
        "probes got through"
    )
    assert after == before, {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert all(back.values()), f"not reachable again after the NB wipe: {back}"
    assert prober.tries > 50, prober.tries
    assert prober.through == 0, (
        f"{prober.through} of {prober.tries} probes crossed the policy during the rebuild"
    )
    assert world.refused()
    faults.wait_whole(c, timeout=30)


def test_ports_stay_held_until_their_policies_are_in(world: World) -> None:
    """netpol-controller's replicas paused (SIGSTOP) across the wipe: the agents write every pod
    port back, and for as long as no policy is in the NB they stay disabled: a1 never reaches b1,
    b2 does not either (nothing is reachable before its policies). Resumed, everything is back."""
    c = world.cluster
    before = nb_state(c)
    pods = {p.lsp for p in world.pods.values()}
    netpol = [r for n in c.nodes for r in n.node.daemons.load() if r.name.startswith("netpol-controller")]
    assert netpol, "no netpol-controller replica recorded"
    prober = Prober(world)
    for r in netpol:
        os.kill(r.pid, signal.SIGSTOP)
    try:
        prober.start()
        db_wipe.wipe(c, "nb")
        back = eventually(lambda: all_ports(c), lambda h: pods <= set(h), timeout=30, every=0.1)
        assert pods <= set(back), f"the agents did not write every pod port back: {back}"
        in_effect_everywhere(c)  # the written-back ports too
        time.sleep(0.5)
        assert not reaches(world.pods["b2"].netns, world.pods["b1"].ip, "tcp", PORT), (
            "reachable, no policy in"
        )
        assert pods <= set(held_ports(c)), "a held port was enabled with netpol-controller stopped"
    finally:
        for r in netpol:
            os.kill(r.pid, signal.SIGCONT)
    try:
        ok = eventually(world.allowed, lambda r: all(r.values()), timeout=60, every=0.05)
        assert all(ok.values()), ok
        time.sleep(1.0)
    finally:
        prober.halt.set()
        prober.join()
    print(
        f"\nnetpol-controller paused across the NB wipe: a1 -> b1 {prober.through} of {prober.tries} through"
    )
    assert prober.tries > 50 and prober.through == 0, (prober.through, prober.tries)
    after = eventually(lambda: nb_state(c), lambda s: s == before, timeout=30)
    assert after == before, {k: (before[k], after[k]) for k in before if before[k] != after[k]}


def in_effect_everywhere(c: Cluster) -> None:
    """`ovn-nbctl --wait=hv sync`: northd (after its reconnect backoff) and every chassis have put
    the NB as it is now into effect."""
    db = read_env_file(c.env_file)["OVN_NB_DB"]
    out = subprocess.run(
        ["ovn-nbctl", f"--db={db}", "--timeout=90", "--wait=hv", "sync"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def all_ports(c: Cluster) -> list[str]:
    return nbctl(c, "--bare", "--columns=name", "list", "Logical_Switch_Port").split()


def held_ports(c: Cluster) -> list[str]:
    out = nbctl(c, "--bare", "--columns=name", "find", "Logical_Switch_Port", "enabled=false")
    return out.split()


def test_sb_wiped_is_rebuilt_by_northd(world: World) -> None:
    c = world.cluster
    chassis = sorted(nbctl_sb(c, "--columns=name", "--bare", "list", "Chassis").split())
    bound = sorted(nbctl_sb(c, "--columns=logical_port", "--bare", "find", "Port_Binding", "up=true").split())
    wiped_at = db_wipe.wipe(c, "sb")

    def sb() -> tuple[list[str], list[str]]:
        return (
            sorted(nbctl_sb(c, "--columns=name", "--bare", "list", "Chassis").split()),
            sorted(
                nbctl_sb(c, "--columns=logical_port", "--bare", "find", "Port_Binding", "up=true").split()
            ),
        )

    again = eventually(sb, lambda s: s == (chassis, bound), timeout=60, every=0.1)
    in_sb = time.monotonic() - wiped_at
    assert again == (chassis, bound), (again, chassis, bound)
    back = eventually(world.allowed, lambda r: all(r.values()), timeout=60, every=0.05)
    reachable = time.monotonic() - wiped_at
    print(
        f"\nSB wiped -> chassis and every port bound again: {in_sb:.2f} s, all reachable: {reachable:.2f} s"
    )
    assert all(back.values()), f"not reachable again after the SB wipe: {back}"
    assert world.refused()
    faults.wait_whole(c, timeout=30)


def nb_cid(c: Cluster) -> str:
    """The NB cluster's id, as its first member's file records it."""
    m = c.central_component.member(c.central, "nb", 1)
    return run_checked(["ovsdb-tool", "db-cid", str(m.dbfile)]).strip()


def nbctl_sb(c: Cluster, *args: str) -> str:
    db = read_env_file(c.env_file)["OVN_SB_DB"]
    out = subprocess.run(["ovn-sbctl", f"--db={db}", "--timeout=20", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout
