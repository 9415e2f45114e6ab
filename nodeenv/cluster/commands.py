"""`k8shost-node cluster-up|cluster-down|cluster-status`: the cluster commands of the CLI."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.daemons import DaemonError
from nodeenv.node import read_env_file

COMMANDS = ("cluster-up", "cluster-down", "cluster-status", "cluster-join", "cluster-restart")


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ClusterSettings.from_env(os.environ)
    g = p.add_argument_group("cluster mode (cluster-up, cluster-down, cluster-status)")
    g.add_argument("--nodes", type=int, default=d.nodes, help="number of nodes (env K8SHOST_NODES)")
    g.add_argument("--cluster-dir", type=Path, default=d.run_dir, help="run dir (env K8SHOST_CLUSTER_DIR)")
    g.add_argument("--prefix", default=d.prefix,
                   help="name prefix of the namespaces it makes (env K8SHOST_CLUSTER_PREFIX)")  # fmt: skip
    g.add_argument("--underlay-cidr", default=d.underlay_cidr,
                   help="the nodes' network, inside namespaces only (env K8SHOST_UNDERLAY_CIDR)")  # fmt: skip
    g.add_argument("--cluster-cidr", default=d.cluster_cidr, help="pod network (env K8SHOST_CLUSTER_CIDR)")
    g.add_argument("--controller-replicas", type=int, default=d.controller_replicas,
                   help="replicas of each cluster-wide controller, on the first nodes "
                        "(env K8SHOST_CONTROLLER_REPLICAS)")  # fmt: skip
    g.add_argument("--api-data", action="store_true", default=d.api_data,
                   help="cluster-up: the API double keeps its objects on disk, so cluster-restart "
                        "restarts it too (env K8SHOST_API_DATA=1)")  # fmt: skip


def settings_from(args: argparse.Namespace) -> ClusterSettings:
    return ClusterSettings(run_dir=args.cluster_dir.resolve(), nodes=args.nodes, prefix=args.prefix,
                           ovn_central=args.ovn_central, underlay_cidr=args.underlay_cidr,
                           cluster_cidr=args.cluster_cidr,
                           controller_replicas=args.controller_replicas,
                           runtime_dir=args.runtime_dir, api_data=args.api_data)  # fmt: skip


def run(command: str, args: argparse.Namespace) -> int:
    try:
        cluster = Cluster(settings_from(args))
    except ValueError as e:
        print(f"{command}: {e}")
        return 2
    if command == "cluster-up":
        t0 = time.monotonic()
        if cluster.is_up():
            print(f"cluster already up in {cluster.settings.run_dir}")
        cluster.up()
        print(f"cluster of {len(cluster.nodes)} nodes up in {time.monotonic() - t0:.1f} s; "
              f"cluster file {cluster.cluster_file}, shell variables in {cluster.env_file}")  # fmt: skip
        for n in cluster.nodes:
            print(f"  {n.name}: netns {n.netns}, address {n.address}, env {n.env_file}")
        return 0
    if command == "cluster-join":
        return join(cluster)
    if command == "cluster-restart":
        return restart(cluster)
    if command == "cluster-down":
        stopped = cluster.down()
        print(f"cluster down; stopped {len(stopped)} daemons")
        return 0
    faults = cluster.faults() if cluster.env_file.exists() else []
    if faults:
        print("found dead or wedged: " + "; ".join(faults))
        return 1
    if cluster.is_up():
        print("".join(f"{k}={v}\n" for k, v in read_env_file(cluster.env_file).items()), end="")
        return 0
    print("cluster is not up")
    return 1


def join(cluster: Cluster) -> int:
    """One more node (node N+1) joins the cluster that is up; its reason when it cannot."""
    if not cluster.is_up():
        print(f"cluster-join: no cluster is up in {cluster.settings.run_dir} (make cluster-up)")
        return 1
    t0 = time.monotonic()
    try:
        n = cluster.join()
    except DaemonError as e:
        print(f"cluster-join: {e}")
        return 1
    print(f"{n.name} joined in {time.monotonic() - t0:.1f} s: netns {n.netns}, address {n.address}, "
          f"env {n.env_file}; the cluster has {', '.join(m.name for m in cluster.nodes)}")  # fmt: skip
    return 0


def restart(cluster: Cluster) -> int:
    """Every daemon of the running cluster killed at once and started again, pods kept
    (nodeenv/cluster/coldrestart.py); the API double too when it keeps its objects on disk."""
    from nodeenv.cluster.coldrestart import KEEP, cold_restart, durable_api  # keeps merges simple
    from nodeenv.cluster.faults import wait_whole

    if not cluster.is_up():
        print(f"cluster-restart: no cluster is up in {cluster.settings.run_dir} (make cluster-up)")
        return 1
    cluster.load()
    keep = () if durable_api(cluster) else KEEP
    try:
        got = cold_restart(cluster, keep)
        whole = wait_whole(cluster, timeout=90)
    except DaemonError as e:
        print(f"cluster-restart: {e}")
        return 1
    print(f"killed {len(got.killed)} daemons at once (kept: {', '.join(keep) or 'none'}); all running "
          f"{got.started_s:.1f} s after the kill ({got.restarts} restarted after exiting early); "
          f"OVN whole {got.started_s + whole:.1f} s after the kill")  # fmt: skip
    return 0
