"""OVN's own floor under the cluster bench's pod-ready latency: the `3 nodes, same load` batch with
no CNI at all.

Each "pod" is a netns with a veth whose host end is up beforehand in its node's namespace (round-
robin over the nodes, as the CNI batch); per port, inside that node's namespace as a script on the
node would run them, one `ovn-nbctl lsp-add ... -- lsp-set-addresses ... -- lsp-set-port-security`
to the node's NB remote list (over the underlay, to the RAFT leader, as its agent connects) and one
`ovs-vsctl --no-wait add-port ... iface-id=...` to its node's OVSDB, timed until that
node's ovn-controller sets `ovn-installed`, at the same concurrency. It runs on the density
batches' namespace switches once their pods are gone (addresses from .10 up) and removes its ports.

That is what a script on the node pays, not a bound (the agent beats it). `cluster_idl_floor` is
the bound: the same ports through bench/scale/floor.py's IdlFloor, one long-lived IDL to the NB
and one to the node's OVS db per node (group commit), with each port's NB row -> ovn-installed
broken down by stage.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from bench import cpu
from bench.cni_batch_floor import (
    FloorPort,
    FloorRun,
    bind_nbctl,
    make_ports,
    remove_ports,
    switches,
    until_installed,
)
from bench.cni_floor import RawOvsdb
from bench.scale.floor import IdlFloor, StageClock, StageRun, stage_run
from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from nodeenv.ovn_pki import client_tls


def tls_env_flags(env: dict[str, str], node: str) -> list[str]:
    """ovn-nbctl's certificate flags for a script on `node` (its own identity of the cluster's CA)."""
    tls = client_tls(env, "bench-floor", node)
    return tls.ctl_flags() if tls else []


def bridge(env: dict[str, str]) -> str:
    return env.get("OVS_BRIDGE", "br-int")


def cluster_floor(c: Cluster, n: int, conc: int, switch_names: list[str], labels: dict[str, str]) -> FloorRun:
    nb_db = read_env_file(c.env_file)["OVN_NB_DB"]  # the members' unix sockets, from this namespace
    subnets = switches(nb_db, switch_names)
    if not subnets:
        raise RuntimeError(f"none of the switches {switch_names} exists: run the CNI batch first")
    nodes = list(c.nodes)
    envs = {
        x.netns: {"OVS_DB": x.env["OVS_DB"], "OVN_NB_DB": nb_db, "OVS_BRIDGE": bridge(x.env)} for x in nodes
    }
    monitors = {ns: RawOvsdb(e["OVS_DB"], "Open_vSwitch", {"Interface": ["name", "external_ids"]})
                for ns, e in envs.items()}  # fmt: skip
    # inside the node, to the NB over its underlay remotes: the path its agent's NB connection takes
    binders = {x.netns: bind_nbctl({**envs[x.netns], "OVN_NB_DB": x.env["OVN_NB_DB"]}, bridge(x.env), x.netns,
                                   tls_env_flags(x.env, x.name)) for x in nodes}  # fmt: skip

    def one(p: FloorPort) -> float:
        return until_installed(p, binders[p.node_netns], monitors[p.node_netns])

    ports: list[FloorPort] = []
    try:
        make_ports(n, subnets, "c", ports, node_netns=lambda k: nodes[k % len(nodes)].netns, first_host=10)
        time.sleep(0.5)  # every vswitchd sees its new links before the clock starts
        before = cpu.sample(labels, words=None)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(conc) as ex:
            ms = list(ex.map(one, ports))
        wall = time.perf_counter() - t0
        return FloorRun(ms, wall, cpu.per_pod_ms(before, cpu.sample(labels, words=None), n))
    finally:
        remove_ports(ports, lambda p: envs[p.node_netns])
        for m in monitors.values():
            m.close()


def cluster_idl_floor(c: Cluster, n: int, conc: int, switch_names: list[str]) -> StageRun:
    """The ports of `cluster_floor` through one IdlFloor per node (NB over the members' unix
    sockets, the leader found by ovnaccess), timed from each port's write to ovn-installed."""
    env = read_env_file(c.env_file)
    subnets = switches(env["OVN_NB_DB"], switch_names)
    if not subnets:
        raise RuntimeError(f"none of the switches {switch_names} exists: run the CNI batch first")
    nodes = list(c.nodes)
    envs = {x.netns: {"OVS_DB": x.env["OVS_DB"], "OVN_NB_DB": env["OVN_NB_DB"]} for x in nodes}
    clock = StageClock(env["OVN_NB_DB"], env["OVN_SB_DB"], [x.env["OVS_DB"] for x in nodes])
    floors = {x.netns: IdlFloor(env["OVN_NB_DB"], x.env["OVS_DB"], bridge(x.env)) for x in nodes}
    started: dict[str, float] = {}

    def one(p: FloorPort) -> None:
        started[p.lsp] = time.monotonic()
        floors[p.node_netns].bind(p)
        clock.installed_at(p.lsp)

    ports: list[FloorPort] = []
    try:
        make_ports(n, subnets, "i", ports, node_netns=lambda k: nodes[k % len(nodes)].netns, first_host=10)
        time.sleep(0.5)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(conc) as ex:
            list(ex.map(one, ports))
        return stage_run(clock, started, time.perf_counter() - t0)
    finally:
        for ns, f in floors.items():
            f.unbind([p for p in ports if p.node_netns == ns])
            f.close()
        remove_ports(ports, lambda p: envs[p.node_netns])
        clock.close()
