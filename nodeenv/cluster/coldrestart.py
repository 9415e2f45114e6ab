"""A cold restart of the whole cluster's daemons at once, pods kept (issue 29 item 2a).

As when k3s (and the node's openvswitch/ovn units) restart on every machine together while the
containers keep running: every daemon of every part (the IAM webhook and the cluster's Prometheus
in control; every NB/SB member, every northd and exporter in central; every node's ovsdb-server,
ovs-vswitchd, ovn-controller, PrismNET agent, FlashDNS listener, CSI plugin and registrar and the
controllers' replicas) is SIGKILLed at once; the pods' network namespaces, veths and the daemons'
files stay. Then each is started again exactly as it ran: its argv, environment, working directory,
log file and namespace read from /proc before the kill (`Launch`), parts in cluster-up's order
(control, central, nodes), daemons in their recorded order; plus what cluster-up did in the
kernel beside the daemons and a userspace ovs-vswitchd takes with it (its tap devices): the node's
underlay address on br-phy, the tunnel neighbours, the VIP routes through the management port.

The API double (`kubeapi`) is kept by default: a k3s restart keeps the API's state in its
datastore; with `--data-dir` the double keeps it on disk too and may be restarted with the rest
(`keep=()`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.control import NodeRouting, route_vips
from nodeenv.cluster.faults import restore_underlay_address
from nodeenv.cluster.underlay import learn_neighbours
from nodeenv.cni_component import CniComponent
from nodeenv.daemons import (
    DaemonError,
    DaemonRecord,
    DaemonTable,
    in_netns,
    is_alive,
    run_checked,
    unix_listening,
    wait_for,
)
from nodeenv.node import Node

KEEP = ("kubeapi",)


@dataclass(frozen=True, slots=True)
class Launch:
    """How one running daemon was started, as /proc tells it."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    log: str
    """Where its stdout went (its log file), "" when not a file (a detaching OVS daemon)."""
    netns: str
    host_mounts: bool
    """Entered with `nsenter --net` (this mount namespace kept), not `ip netns exec`."""

    @property
    def pidfile(self) -> Path | None:
        flag = next((a for a in self.argv if a.startswith("--pidfile=")), None)
        return Path(flag.removeprefix("--pidfile=")) if flag and "--detach" in self.argv else None

    @classmethod
    def read(cls, rec: DaemonRecord, netns: str) -> Launch:
        proc = Path(f"/proc/{rec.pid}")
        argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0")[:-1]]  # "" args kept
        env = dict(
            kv.decode().partition("=")[::2] for kv in (proc / "environ").read_bytes().split(b"\0") if kv
        )
        out = os.readlink(proc / "fd" / "1")
        same_mounts = os.readlink(proc / "ns" / "mnt") == os.readlink("/proc/self/ns/mnt")
        return cls(rec.name, argv, env, os.readlink(proc / "cwd"), out if out.startswith("/") and
                   not out.startswith("/dev/") else "", netns, bool(netns) and same_mounts)  # fmt: skip

    def start(self, table: DaemonTable) -> DaemonRecord:
        """Started again as before, recorded under its name."""
        pidfile = self.pidfile
        if pidfile is not None:
            pidfile.unlink(missing_ok=True)
            argv = ["prlimit", "--core=unlimited", "--", *self.argv]
            run_checked(in_netns(self.netns, argv), self.env, cwd=Path(self.cwd))
            pid = int(pidfile.read_text().strip())
        else:
            with open(self.log or os.devnull, "ab") as out:
                pid = subprocess.Popen(
                    in_netns(self.netns, self.argv, host_mounts=self.host_mounts),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                    cwd=self.cwd,
                    start_new_session=True,
                ).pid
        rec = DaemonRecord(name=self.name, pid=pid, exe=Path(self.argv[0]).name)
        table.add(rec)
        return rec


@dataclass
class ColdRestart:
    killed: list[str]
    """`<part>/<daemon>` of every daemon killed"""
    at: float
    """time.monotonic() of the kill"""
    started_s: float = 0.0
    """seconds from the kill until every daemon was started again and every node's agent serves
    CNI requests (ADD, DEL) again"""
    restarts: int = 0
    """daemons that exited once started and were started again (see `supervise`)"""


def _parts(cluster: Cluster) -> list[tuple[str, Node]]:
    return [
        ("control", cluster.control),
        ("central", cluster.central),
        *((n.name, n.node) for n in cluster.nodes),
    ]


def kill_all(cluster: Cluster, keep: Collection[str] = KEEP) -> tuple[ColdRestart, dict[str, list[Launch]]]:
    """Every daemon of the cluster but `keep` SIGKILLed at once (their launches read first)."""
    launches: dict[str, list[Launch]] = {}
    doomed: list[tuple[str, DaemonRecord]] = []
    for label, part in _parts(cluster):
        recs = [r for r in part.daemons.load() if r.name not in keep and is_alive(r)]
        launches[label] = [Launch.read(r, part.settings.netns) for r in recs]
        doomed += [(label, r) for r in recs]
    at = time.monotonic()
    for _, rec in doomed:
        os.kill(rec.pid, signal.SIGKILL)
    for label, rec in doomed:
        wait_for(lambda r=rec: not is_alive(r), f"{label}/{rec.name} to die", timeout=10)  # type: ignore[misc]
    return ColdRestart([f"{label}/{r.name}" for label, r in doomed], at), launches


def start_all(cluster: Cluster, launches: dict[str, list[Launch]], timeout: float = 60.0) -> int:
    """Every killed daemon started again, parts in cluster-up's order; on each node, once its
    ovs-vswitchd is back, the kernel state its taps took with them put back (address, neighbours,
    VIP routes once the agent has its management port again). A daemon that exits while what it
    needs is still coming up (the CSI registrar before its plugin's socket) is started again, as
    its supervisor (kubelet, systemd) would, all along; how many such restarts were needed."""
    started = Supervised([])
    for label, part in _parts(cluster):
        for launch in launches.get(label, []):
            started.items.append((part, launch, launch.start(part.daemons)))
    for n in cluster.nodes:
        if any(launch.name == "ovs-vswitchd" for launch in launches.get(n.name, [])):
            restore_underlay_address(cluster, n, timeout=timeout)
    learn_neighbours([(n.netns, n.address) for n in cluster.nodes])
    prefixes = NodeRouting().prefixes
    for n in cluster.nodes:
        agent = CniComponent().settings(n.node)
        mgmt = agent.management_if
        wait_for(lambda n=n, m=mgmt: started.revive() >= 0 and route_vips(n.netns, m, prefixes),  # type: ignore[misc]
                 f"the management port of {n.name} back", timeout=timeout)  # fmt: skip
        # as cluster-up: the node is back once its agent serves the runtime's ADDs and DELs again
        wait_for(lambda a=agent: started.revive() >= 0 and unix_listening(a.socket),  # type: ignore[misc]
                 f"prismnet-agent of {n.name} to serve its socket", timeout=timeout)  # fmt: skip
    started.settle(timeout)
    return started.restarts


@dataclass
class Supervised:
    """The daemons started again, each started once more whenever it has exited."""

    items: list[tuple[Node, Launch, DaemonRecord]]
    restarts: int = 0

    def revive(self) -> int:
        """Start again what has exited; how many."""
        n = 0
        for i, (part, launch, rec) in enumerate(self.items):
            if not is_alive(rec):
                self.items[i] = (part, launch, launch.start(part.daemons))
                n += 1
        self.restarts += n
        return n

    def settle(self, timeout: float, stable: float = 3.0) -> None:
        """`revive` until every one has lived `stable` seconds (DaemonError after `timeout`)."""
        deadline, calm_since = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() - calm_since < stable:
            if time.monotonic() > deadline:
                dead = [launch.name for _, launch, rec in self.items if not is_alive(rec)]
                raise DaemonError(f"still exiting {timeout:.0f} s after the restart: {dead}")
            if self.revive():
                calm_since = time.monotonic()
            time.sleep(0.2)


def durable_api(cluster: Cluster) -> bool:
    """Whether the cluster's API double keeps its objects on disk (started with --data-dir), so a
    cold restart may take it too."""
    recs = [r for r in cluster.control.daemons.load() if r.name == "kubeapi" and is_alive(r)]
    return bool(recs) and "--data-dir" in Launch.read(recs[0], "").argv


def cold_restart(cluster: Cluster, keep: Collection[str] = KEEP, timeout: float = 60.0) -> ColdRestart:
    """kill_all then start_all; `started_s` measured from the kill."""
    got, launches = kill_all(cluster, keep)
    got.restarts = start_all(cluster, launches, timeout)
    got.started_s = time.monotonic() - got.at
    return got
