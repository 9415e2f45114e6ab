"""A power loss of a booted cluster (`boot --nodes N`, N >= 2), and its boot again from what the disks
kept (issue 29 item 2b): `python -m nodeenv.kubelet powerloss`, then `python -m nodeenv.kubelet resume`.

`power_loss`: every process of the cluster's machines SIGKILLed at once -- the API double (k3s's
server), Prometheus, every runner (kubelet) and its sidecar stand-ins, every container of every pod
(conmon included: every process in a node's or a pod's network namespace) -- then what lives in
memory or tmpfs removed, as the power going takes it: the nodes' and the pods' network namespaces
(their veths and the userspace datapath's taps with them), every mount below the run dir (kubelet's
root, volumes' staging and publish mounts, tmpfs volumes), each node's `/run` (OVS and OVN sockets,
pid files), the run dir's alias under /run/k8shost. What a node keeps on disk stays: its root (the
OVS database with the node's system-id, ovn-central's RAFT files, kubelet's pod directories, the
CNI config), the API double's `--data-dir`, the PKI, the container store's records.

Outside the cluster's power domain, and so kept: the underlay (the datacenter's switch) and
PlasmaCloud's LightningStor VolumeService in it, with the volumes' loop devices (the platform's
side of an attachment, as an iSCSI target stays exported while the node that logged in is down).

`resume` (bootnodes.resume): the nodes' namespaces wired to the underlay again, the API double
from its data dir, the runners and Prometheus with the same command lines as at `boot`; each
runner finds its pods bound to its node in the API and starts them again in new sandboxes, as
kubelet does after a reboot; the host setup of `boot` (br-phy, routes) redone as each node's OVS
and agent come back.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError, is_alive
from nodeenv.kubelet import boot, bootnodes, monitoring, rootdir
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.boot import BootSettings
from nodeenv.kubelet.kubeletapi.pki import make_kubelet_pki
from nodeenv.kubelet.nodenet import BootNodes
from nodeenv.kubelet.status import now
from nodeenv.runtime_dir import link_run_dir, short_path

KEPT = ("lightningstor",)
"""Daemons of the boot's table outside the cluster's power domain (PlasmaCloud's own service)."""
NODE_TMPFS = ("run", "var/run")
"""A node's directories that are tmpfs on a real node, under its root."""
NOT_READY = ("Ready", "ContainersReady")
"""The pod conditions the node lifecycle controller turns False when a node stops posting status."""


class PowerLossError(RuntimeError):
    pass


@dataclass
class PowerLoss:
    killed: int
    """processes SIGKILLed"""
    netns: list[str]
    """network namespaces gone"""
    mounts: int
    """mounts gone"""


def booted_nodes(s: BootSettings) -> BootNodes:
    """The nodes `boot` made, from `<run dir>/boot.json`."""
    path = s.run_dir / "boot.json"
    booted = json.loads(path.read_text()) if path.exists() else {}
    if int(booted.get("nodes", 1)) < 2:
        raise PowerLossError(f"{s.run_dir} holds no multi-node boot (boot --nodes N, N >= 2)")
    return BootNodes(booted["prefix"], int(booted["nodes"]), short_path(s.run_dir, s.runtime_dir))


def _netns_inodes(names: list[str]) -> set[int]:
    out = set()
    for name in names:
        with contextlib.suppress(OSError):
            out.add(os.stat(f"/run/netns/{name}").st_ino)
    return out


def _pids_in(inodes: set[int]) -> set[int]:
    """Every process whose network namespace is one of `inodes`."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(entry / "ns" / "net").st_ino in inodes:
                    pids.add(int(entry.name))
    return pids


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_everything(s: BootSettings, nodes: BootNodes) -> int:
    """SIGKILL, at once, every process of the cluster's machines; how many. Again until none is
    left: a `podman run` already under way when the first round came may still start a container."""
    namespaces = [n.netns for n in nodes.nodes] + bootnodes.pod_netns(s, nodes)
    inodes = _netns_inodes(namespaces)
    killed: set[int] = set()
    deadline = time.monotonic() + 20
    while True:
        pids = {p for p in _pids_in(inodes) | _table_pids(s) if p != os.getpid() and _running(p)}
        if not pids:
            return len(killed)
        if time.monotonic() > deadline:
            raise PowerLossError(f"processes still running 20 s after SIGKILL: {sorted(pids)}")
        for pid in pids - killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= pids
        time.sleep(0.2)


def _table_pids(s: BootSettings) -> set[int]:
    return {r.pid for r in s.table().load() if r.name not in KEPT and is_alive(r)}


def drop_mounts(s: BootSettings) -> int:
    """Every mount below the run dir gone (deepest first); how many there were."""
    points = rootdir.mounts_under(s.run_dir)
    for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    return len(points)


def power_loss(s: BootSettings) -> PowerLoss:
    """Everything of the cluster's machines killed and their memory and tmpfs state gone."""
    nodes = booted_nodes(s)
    link_run_dir(s.run_dir, s.runtime_dir)  # the node roots are reached through it
    killed = kill_everything(s, nodes)
    mounts = drop_mounts(s)
    gone = bootnodes.pod_netns(s, nodes)
    for name in gone:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for n in nodes.nodes:
        if Path(f"/run/netns/{n.netns}").exists():
            nodes.underlay.detach(n.index, n.name)  # its uplink's switch port goes with it
            gone.append(n.netns)
        for d in NODE_TMPFS:
            path = n.root / d
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
    alias = short_path(s.run_dir, s.runtime_dir)
    if alias != s.run_dir and alias.is_symlink():
        alias.unlink()
    return PowerLoss(killed, gone, mounts)


def main(s: BootSettings) -> int:
    try:
        got = power_loss(s)
    except (PowerLossError, OSError, KeyError, ValueError) as e:
        print(f"powerloss: {e}", flush=True)
        return 1
    nodes = [n for n in got.netns if not n.startswith("cni-")]
    print(f"powerloss: killed {got.killed} processes at once; gone: {len(got.netns)} network namespaces "
          f"({', '.join(nodes)} and {len(got.netns) - len(nodes)} pods'), {got.mounts} mounts, the nodes' "
          f"/run and {s.run_dir}'s alias; kept: "
          f"the disks under {s.run_dir}, the underlay and {', '.join(KEPT)}; `resume` boots it again",
          flush=True)  # fmt: skip
    return 0


def mark_pods_not_ready(client: KubeClient) -> int:
    """What kube-controller-manager's node lifecycle controller does, finding that no node has posted
    its status since the power went: every pod's Ready (and ContainersReady) condition False, reason
    NodeNotReady, until its node's kubelet runs it again and says otherwise; how many were Ready."""
    marked = 0
    for p in client.list("/api/v1", "pods"):
        conds = (p.get("status") or {}).get("conditions") or []
        if not any(c.get("type") in NOT_READY and c.get("status") == "True" for c in conds):
            continue
        conds = [{**c, "status": "False", "reason": "NodeNotReady", "lastTransitionTime": now()}
                 if c.get("type") in NOT_READY else c for c in conds]  # fmt: skip
        m = p["metadata"]
        client.patch_status("/api/v1", "pods", m["namespace"], m["name"], {"conditions": conds})
        marked += 1
    return marked


def resume(s: BootSettings, env: Mapping[str, str]) -> BootNodes:
    """The cluster booted again from its run dir after `power_loss` (or a real one): the nodes, the
    API double from its data dir, the runners, LightningStor if it is not running, Prometheus."""
    nodes = booted_nodes(s)
    if not (s.run_dir / bootnodes.API_DATA).is_dir():
        raise PowerLossError(f"{s.run_dir / bootnodes.API_DATA} is missing: this boot kept no API objects")
    alive = [r.name for r in s.table().load() if r.name not in KEPT and is_alive(r)]
    if alive:
        raise PowerLossError(f"still running from {s.run_dir}: {', '.join(alive)} (`make boot-down` first)")
    left = [n.netns for n in nodes.nodes if Path(f"/run/netns/{n.netns}").exists()]
    if left:
        raise PowerLossError(f"network namespaces {', '.join(left)} exist: the nodes are still up")
    s.make_run_dir()
    nodes.create(underlay=not Path(f"/run/netns/{nodes.underlay.netns}").exists())
    boot.say(f"{nodes.count} nodes: " + ", ".join(f"{n.name} {n.address} ({n.netns})" for n in nodes.nodes))
    kubelets = make_kubelet_pki(s.run_dir / "kubelet-pki", [(n.name, n.address) for n in nodes.nodes])
    kubeconfig, url = bootnodes.start_api(s, nodes, env, kubelets)
    boot.say(f"{mark_pods_not_ready(KubeClient.from_kubeconfig(s.kubeconfig))} pods marked not Ready")
    bootnodes.start_runners(s, nodes, env, kubeconfig, kubelets)
    if not any(r.name == "lightningstor" and is_alive(r) for r in s.table().load()):
        names = [n.name for n in nodes.nodes]
        boot.start_volume_service(s, env, nodes.central_address, names, nodes.underlay.netns)
    boot.start_monitoring(s, url, nodes.nodes[0].netns)
    return nodes


def resume_main(s: BootSettings, env: Mapping[str, str]) -> int:
    """`resume`: as `boot` from the kept run dir; waits for every pod Ready, prints what boot prints."""
    if os.geteuid() != 0:
        print("resume: cannot start: needs root (network namespaces, OVS, mounts)", file=sys.stderr)
        return 1
    if why := ovn_tree.missing():
        print(f"resume: cannot start: {why}", file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        tick = bootnodes.host_setup(resume(s, env), bootnodes.service_cidr(s))
    except (PowerLossError, boot.BootError, DaemonError, OSError, KeyError, ValueError) as e:
        print(f"resume: failed: {e}\nresume: logs in {s.run_dir}; `make boot-down` removes what was made",
              file=sys.stderr)  # fmt: skip
        return 1
    pods = boot.wait_ready(s, tick)
    ready = time.monotonic() - started
    print(boot.kubectl(s, "get", "pods", "-A", "-o", "wide"), end="")
    print(boot.summary(pods))
    print(monitoring.await_targets(s.run_dir, 60))
    late = boot.waiting_for(pods)
    took = (
        f"not every pod Ready {ready:.0f} s after the start"
        if late
        else f"every pod Ready {ready:.1f} s after the start"
    )
    boot.say(f"resumed: {took}; kubectl --kubeconfig {s.kubeconfig}")
    return 0 if not late else 1
