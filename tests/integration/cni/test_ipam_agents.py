"""OVN NB IPAM across agents: independent NB connections (one per agent) allocating at once."""

from __future__ import annotations

import ipaddress
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from cni.ovn import Lsp, connect
from cni.ovn_nb import Northbound
from nodeenv.node import Node
from ovnaccess.connection import Ovsdb
from tests.integration.cni.conftest import Agent

_NO_PORT = Lsp("", "", (), "", False)


def _drop_switches(agent: Agent, names: list[str]) -> None:
    """A test's namespace switches and their router ports."""
    for n in names:
        agent.nbctl("--if-exists", "ls-del", n)
        agent.nbctl("--if-exists", "lrp-del", f"rtr-{n}")


def test_four_agents_never_hand_out_one_address_twice(agent: Agent, ovn_node: Node) -> None:
    dbs = [connect(ovn_node.endpoints["OVN_NB_DB"], "OVN_Northbound") for _ in range(4)]
    try:
        nbs = [Northbound(db, owner=f"test-agent-{i}") for i, db in enumerate(dbs)]
        cluster = ipaddress.IPv4Network("10.99.0.0/16")
        infos = {nb.ensure_switch("k8s-twoagents", cluster, 24) for nb in nbs}
        assert len(infos) == 1, "every agent must see one switch and one subnet"
        subnet = ipaddress.IPv4Network(next(iter(infos)).subnet)

        def allocate(i: int) -> str:
            nb = nbs[i % 4]
            return nb.allocate_port("k8s-twoagents", f"two-{i}", {"prismnet.namespace": "twoagents"})[1]

        with ThreadPoolExecutor(16) as ex:
            ips = list(ex.map(allocate, range(200)))
        assert len(set(ips)) == 200
        assert all(ipaddress.IPv4Address(ip) in subnet for ip in ips)
        nb_addrs = agent.nbctl(
            "--bare",
            "--columns=addresses",
            "find",
            "Logical_Switch_Port",
            "external_ids:prismnet.namespace=twoagents",
        ).split()
        assert sorted(a for a in nb_addrs if "." in a) == sorted(ips)
    finally:
        for i in range(200):
            nbs[0].delete_port(f"two-{i}")
        _drop_switches(agent, ["k8s-twoagents"])
        for db in dbs:
            db.stop()


def test_concurrent_first_use_of_a_namespace_carves_one_subnet_each(agent: Agent, ovn_node: Node) -> None:
    dbs = [connect(ovn_node.endpoints["OVN_NB_DB"], "OVN_Northbound") for _ in range(4)]
    names = [f"k8s-carve{i}" for i in range(6)]
    try:
        nbs = [Northbound(db, owner=f"test-agent-{i}") for i, db in enumerate(dbs)]
        cluster = ipaddress.IPv4Network("10.99.0.0/16")
        with ThreadPoolExecutor(12) as ex:
            infos = list(ex.map(lambda i: nbs[i % 4].ensure_switch(names[i % 6], cluster, 24), range(12)))
        by_name = {}
        for info in infos:
            assert by_name.setdefault(info.name, info.subnet) == info.subnet
        subnets = [ipaddress.IPv4Network(s) for s in by_name.values()]
        all_switches = agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
        assert sorted(n for n in all_switches if n.startswith("k8s-carve")) == sorted(names)
        assert len(set(subnets)) == 6
    finally:
        _drop_switches(agent, names)
        for db in dbs:
            db.stop()


class _Interleave:
    """A before-commit hook: the first attempt of one agent waits at a barrier shared with the
    other agent, so both have read the database before either commits. Counts attempts."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier, self.attempts, self.armed = barrier, 0, False

    def __call__(self, op: str) -> None:
        if not self.armed:
            return
        self.attempts += 1
        if self.attempts == 1:
            self.barrier.wait()


def _two_interleaved_agents(ovn_node: Node) -> tuple[list[Ovsdb], list[Northbound], list[_Interleave]]:
    barrier = threading.Barrier(2, timeout=10)
    hooks = [_Interleave(barrier), _Interleave(barrier)]
    dbs = [connect(ovn_node.endpoints["OVN_NB_DB"], "OVN_Northbound") for _ in range(2)]
    nbs = [
        Northbound(db, owner=f"test-race-{i}", before_commit=h)
        for i, (db, h) in enumerate(zip(dbs, hooks, strict=True))
    ]
    return dbs, nbs, hooks


def test_two_agents_that_read_before_either_commits_get_distinct_addresses(
    agent: Agent, ovn_node: Node
) -> None:
    cluster = ipaddress.IPv4Network("10.99.0.0/16")
    dbs, nbs, hooks = _two_interleaved_agents(ovn_node)
    try:
        for nb in [*nbs, nbs[0]]:  # unarmed: afterwards both agents' replicas hold the switch
            nb.ensure_switch("k8s-race", cluster, 24)
        for h in hooks:
            h.armed = True
        with ThreadPoolExecutor(2) as ex:
            futs = [ex.submit(nb.allocate_port, "k8s-race", f"race-{i}", {}) for i, nb in enumerate(nbs)]
            ips = [f.result(timeout=30)[1] for f in futs]
        assert ips[0] != ips[1], "both agents handed out one address"
        assert sorted(h.attempts for h in hooks) == [1, 2], "exactly one agent must have retried"
    finally:
        _drop_switches(agent, ["k8s-race"])
        for db in dbs:
            db.stop()


def test_two_agents_that_carve_at_once_get_distinct_subnets(agent: Agent, ovn_node: Node) -> None:
    cluster = ipaddress.IPv4Network("10.99.0.0/16")
    dbs, nbs, hooks = _two_interleaved_agents(ovn_node)
    names = ["k8s-racecarve0", "k8s-racecarve1"]
    for h in hooks:
        h.armed = True
    try:
        with ThreadPoolExecutor(2) as ex:
            futs = [ex.submit(nb.ensure_switch, names[i], cluster, 24) for i, nb in enumerate(nbs)]
            infos = [f.result(timeout=30) for f in futs]
        assert infos[0].subnet != infos[1].subnet, "both agents carved one subnet"
        assert sorted(h.attempts for h in hooks) == [1, 2], "exactly one agent must have retried"
    finally:
        _drop_switches(agent, names)
        for db in dbs:
            db.stop()


def test_allocation_follows_addresses_another_writer_changes(agent: Agent, ovn_node: Node) -> None:
    """Parsed port addresses are cached per row; an update by someone else must replace them."""
    db = connect(ovn_node.endpoints["OVN_NB_DB"], "OVN_Northbound")
    nb = Northbound(db, owner="test-cache")
    try:
        info = nb.ensure_switch("k8s-cache", ipaddress.IPv4Network("10.99.0.0/16"), 24)
        net = ipaddress.IPv4Network(info.subnet)
        host = [str(net.network_address + i) for i in range(7)]  # host[1] is the gateway

        def held_by_foreign(ip: str) -> None:
            agent.nbctl("lsp-set-addresses", "foreign", f"0a:58:00:00:00:01 {ip}")
            deadline = time.monotonic() + 10
            while ip not in " ".join((nb.port("foreign") or _NO_PORT).addresses):
                assert time.monotonic() < deadline, "the IDL never saw the foreign update"
                time.sleep(0.01)

        assert nb.allocate_port("k8s-cache", "cache-0", {})[1] == host[2]
        agent.nbctl("lsp-add", "k8s-cache", "foreign")
        held_by_foreign(host[3])
        assert nb.allocate_port("k8s-cache", "cache-1", {})[1] == host[4]
        held_by_foreign(host[5])  # .3 is free again, .5 is not
        assert nb.allocate_port("k8s-cache", "cache-2", {})[1] == host[3]
        assert nb.allocate_port("k8s-cache", "cache-3", {})[1] == host[6]
    finally:
        for name in ("cache-0", "cache-1", "cache-2", "cache-3", "foreign"):
            nb.delete_port(name)
        _drop_switches(agent, ["k8s-cache"])
        db.stop()
