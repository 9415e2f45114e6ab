"""Faults injected into a running cluster, and the restarts that end them (tests and the bench).

Each daemon is killed by the PID the cluster recorded (SIGKILL: no goodbye to its peers) and
started again exactly as cluster-up started it, on the same database files, sockets and logs:

- an NB or SB RAFT member (the leader, found through `cluster/status`): it rejoins its cluster;
- an ovn-northd (the active one, found through its `status`): the standby takes the SB lock;
- a node's ovn-controller: it reconnects to its OVS database and the SB and keeps its chassis;
- a node's ovs-vswitchd (SIGTERM, as a restart does): it reopens its bridges' devices, and the
  node's address is put back on br-phy if the device lost it (its SB connection rides that);
- a whole node (`kill_node`): every daemon of it killed at once; `Cluster.remove` takes what is
  left off the machine and a node-controller releases its state once its Node is deleted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from nodeenv.cluster.chassis import PHYS_BRIDGE
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.daemons import DaemonError, DaemonRecord, is_alive, start_detaching, stop, wait_for
from nodeenv.node import Node, read_env_file
from nodeenv.ovn_central import DATABASES, Member, central_dir, cluster_status, northd_status, rundirs
from nodeenv.ovn_pki import client_tls
from nodeenv.ovn_stack import controller_argv, link_exists
from nodeenv.vswitchd import choose_vswitchd


@dataclass(frozen=True, slots=True)
class Killed:
    part: str
    """"central" or a node name"""
    daemon: str
    at: float
    """time.monotonic() of the kill"""


def record(node: Node, daemon: str) -> DaemonRecord:
    found = [r for r in node.daemons.load() if r.name == daemon]
    if not found:
        raise DaemonError(f"no daemon {daemon} recorded in {node.run_dir}")
    return found[0]


def kill(node: Node, daemon: str, sig: int = signal.SIGKILL) -> float:
    """Send `sig` to the recorded daemon and wait until it is gone; the time it was sent."""
    rec = record(node, daemon)
    at = time.monotonic()
    if sig == signal.SIGTERM:
        stop(rec)
    else:
        os.kill(rec.pid, sig)
    wait_for(lambda: not is_alive(rec), f"{daemon} (pid {rec.pid}) to die", timeout=10)
    return at


def leader(cluster: Cluster, key: str, timeout: float = 20.0) -> Member:
    """The NB (`key` nb) or SB (sb) member that leads its RAFT cluster now."""
    found: list[Member] = []

    def led() -> bool:
        m = cluster.central_component.leader(cluster.central, key)
        found[:] = [m] if m else []
        return bool(found)

    wait_for(led, f"a {key.upper()} leader", timeout=timeout)
    return found[0]


def kill_leader(cluster: Cluster, key: str) -> tuple[Member, float]:
    m = leader(cluster, key)
    return m, kill(cluster.central, m.daemon)


def restart_member(cluster: Cluster, m: Member, timeout: float = 30.0) -> None:
    """Start the member again; wait until it is a member of its cluster again (follower or leader)."""
    cluster.central_component.restart_member(cluster.central, m.db.key, m.index)
    wait_for(
        lambda: cluster_status(m.ctl, m.db.name).get("Role") in ("follower", "leader"),
        f"{m.daemon} to rejoin its cluster",
        timeout=timeout,
    )


def active_northd(cluster: Cluster, timeout: float = 20.0) -> str:
    ctls = cluster.central_component.northd_ctls(cluster.central)
    found: list[str] = []

    def active() -> bool:
        found[:] = [n for n, c in ctls.items() if northd_status(c) == "active"]
        return bool(found)

    wait_for(active, "an active ovn-northd", timeout=timeout)
    return found[0]


def restart_northd(cluster: Cluster, label: str) -> None:
    """ovn-northd `label` again, as OvnCentral.start runs it (it comes up as the standby)."""
    directory = central_dir(cluster.central)
    env = {**cluster.central.process_env(), **read_env_file(cluster.central.env_file), **rundirs(directory)}
    nb, sb = env["OVN_NB_DB"], env["OVN_SB_DB"]
    start_detaching(
        label,
        ["ovn-northd", f"--ovnnb-db={nb}", f"--ovnsb-db={sb}", f"--unixctl={directory / f'{label}.ctl'}",
         f"--log-file={directory / f'{label}.log'}"],
        directory / f"{label}.pid",
        env,
        cluster.central.daemons,
        cluster.central.settings.netns,
    )  # fmt: skip
    ctl = cluster.central_component.northd_ctls(cluster.central)[label]
    wait_for(lambda: northd_status(ctl) in ("active", "standby"), f"{label} to answer", timeout=20)


def _node_env(n: ClusterNode) -> dict[str, str]:
    ovs_dir = n.node.run_dir / "ovs"
    return {**n.node.process_env(), **read_env_file(n.env_file), **rundirs(ovs_dir)}


def restart_ovn_controller(n: ClusterNode) -> None:
    """ovn-controller again on the node's OVS database (as start_controller runs it); its chassis
    stays the node's (system-id in the OVS database)."""
    ovs_dir, env = n.node.run_dir / "ovs", _node_env(n)
    start_detaching(
        "ovn-controller",
        controller_argv(env["OVS_DB"], ovs_dir, client_tls(env, "ovn-controller", n.name)),
        ovs_dir / "ovn-controller.pid",
        env,
        n.node.daemons,
        n.netns,
    )


def restart_vswitchd(cluster: Cluster, n: ClusterNode) -> float:
    """Stop the node's ovs-vswitchd (SIGTERM) and start it again as start_vswitchd does; the node's
    underlay address back on br-phy if the device lost it. The time it was stopped."""
    ovs_dir, env = n.node.run_dir / "ovs", _node_env(n)
    at = kill(n.node, "ovs-vswitchd", signal.SIGTERM)
    vswitchd = choose_vswitchd()
    start_detaching(
        "ovs-vswitchd",
        [str(vswitchd.binary), env["OVS_DB"], f"--unixctl={ovs_dir / 'ovs-vswitchd.ctl'}",
         f"--log-file={ovs_dir / 'ovs-vswitchd.log'}"],
        ovs_dir / "ovs-vswitchd.pid",
        env,
        n.node.daemons,
        n.netns,
    )  # fmt: skip
    restore_underlay_address(cluster, n)
    return at


def restore_underlay_address(cluster: Cluster, n: ClusterNode, timeout: float = 15.0) -> None:
    """After ovs-vswitchd started again: its bridges' devices back, the node's underlay address
    back on br-phy if the device lost it, and vswitchd's route to it learned (tunnels ride it)."""
    for bridge in (PHYS_BRIDGE, n.node.settings.bridge):
        wait_for(lambda b=bridge: link_exists(b, n.netns), f"{bridge} back on {n.name}", timeout=timeout)  # type: ignore[misc]
    ns = ["ip", "-n", n.netns]
    have = subprocess.run(
        [*ns, "-4", "-o", "addr", "show", "dev", PHYS_BRIDGE], capture_output=True, text=True
    )
    if f" {n.address}/" not in have.stdout:
        prefixlen = cluster.settings.underlay.prefixlen
        subprocess.run([*ns, "addr", "add", f"{n.address}/{prefixlen}", "dev", PHYS_BRIDGE], check=True)
    subprocess.run([*ns, "link", "set", PHYS_BRIDGE, "up"], check=True)
    appctl = ["ovs-appctl", "-t", n.vswitchd_ctl, "ovs/route/show"]
    wait_for(lambda: n.address in subprocess.run(appctl, capture_output=True, text=True).stdout,
             f"ovs-vswitchd of {n.name} to learn its route again", timeout=timeout)  # fmt: skip


def kill_node(n: ClusterNode) -> float:
    """Every daemon of the node killed at once (SIGKILL), as when its machine dies; the time."""
    records = n.node.daemons.load()
    at = time.monotonic()
    for rec in records:
        if is_alive(rec):
            os.kill(rec.pid, signal.SIGKILL)
    for rec in records:
        wait_for(lambda r=rec: not is_alive(r), f"{rec.name} of {n.name} to die", timeout=10)  # type: ignore[misc]
    return at


def _appctl(ctl: Path, *args: str) -> str:
    out = subprocess.run(["ovs-appctl", "-t", str(ctl), *args], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def not_whole(cluster: Cluster) -> list[str]:
    """What keeps the cluster from being whole again after a fault ([] = whole): every RAFT member
    a member of its cluster with one leader per database, every northd active or standby and
    connected to the NB and SB, every node's ovn-controller connected to the SB."""
    comp, central, out = cluster.central_component, cluster.central, []
    if comp.mode == "raft":
        for db in DATABASES:
            roles = [
                cluster_status(m.ctl, db.name).get("Role", "")
                for m in comp.member_list(central_dir(central), db)
            ]
            if sorted(roles) != ["follower"] * (len(roles) - 1) + ["leader"]:
                out.append(f"{db.name} members are {roles}")
    for label, ctl in comp.northd_ctls(central).items():
        if northd_status(ctl) not in ("active", "standby"):
            out.append(f"{label} is {northd_status(ctl) or 'not answering'}")
        for which in ("nb", "sb"):
            status = _appctl(ctl, f"{which}-connection-status")
            if status != "connected":
                out.append(f"{label}: {which.upper()} {status or 'not answering'}")
    for n in cluster.nodes:
        rec = record(n.node, "ovn-controller")
        status = _appctl(n.node.run_dir / "ovs" / f"ovn-controller.{rec.pid}.ctl", "connection-status")
        if status != "connected":
            out.append(f"ovn-controller of {n.name}: SB {status or 'not answering'}")
    return out


def wait_whole(cluster: Cluster, timeout: float = 60.0) -> float:
    """Seconds until `not_whole` is empty (raises with what is still wrong after `timeout`)."""
    t0, deadline = time.monotonic(), time.monotonic() + timeout
    while problems := not_whole(cluster):
        if time.monotonic() > deadline:
            raise DaemonError(f"the cluster is not whole again after {timeout:.0f} s: {'; '.join(problems)}")
        time.sleep(0.1)
    return time.monotonic() - t0
