"""k8shost-node: start/stop the embedded node environment, or run the sandbox scenario.

k8shost-node up        start OVS/OVN (and the suite's daemons) in .run/, write .run/node.env
k8shost-node down      stop exactly what `up` started (by PID) and remove .run/
k8shost-node status    say whether the environment is up and print node.env
k8shost-node sandbox   a 3-node cluster up in .run-sandbox/ (its own, beside cluster-up), the scenario
                       (a table of steps and the node each ran on), down; --nodes 1: on one node
                       (node-up, the scenario, node-down)
k8shost-node sandbox-down  stop a sandbox cluster left up by `sandbox --keep`
k8shost-node cluster-up      start N nodes (network namespaces) over a Geneve underlay, OVN central
                             and the API double; write .run-cluster/cluster.{json,env} and one
                             node.env per node
k8shost-node cluster-down    stop the cluster by PID, delete its namespaces, remove its run dir
k8shost-node cluster-status  say whether the cluster is up and print cluster.env
k8shost-node cluster-join    one more node joins the running cluster (the next node name)
k8shost-node cluster-restart every daemon of the running cluster killed at once and started
                             again, pods kept (the API double too with --api-data)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from common.jsonlog import setup_logging
from nodeenv import ovn_tree
from nodeenv.cluster import commands as cluster_commands
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.components import default_components
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_central import MODES
from nodeenv.sandbox import ClusterSandbox, run_cluster, run_single, sandbox_settings

log = logging.getLogger("nodeenv")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="k8shost-node", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = ["up", "down", "status", "sandbox", "sandbox-down", *cluster_commands.COMMANDS]
    p.add_argument("command", choices=commands)
    d = NodeSettings.from_env(os.environ)
    p.add_argument("--run-dir", type=Path, default=d.run_dir, help="private run dir (env K8SHOST_RUN_DIR)")
    p.add_argument("--runtime-dir", type=Path, default=d.runtime_dir,
                   help="where each run dir's short alias is made, its unix sockets under it: "
                        "/run/k8shost/<hash> (env K8SHOST_RUNTIME_DIR)")  # fmt: skip
    p.add_argument("--bridge", default=d.bridge, help="OVN integration bridge (env K8SHOST_BRIDGE)")
    p.add_argument(
        "--ovn-central",
        choices=MODES,
        default=d.ovn_central,
        help="OVN central (node and cluster): standalone databases, or 3-member RAFT clusters with "
        "two northd (env K8SHOST_OVN_CENTRAL)",
    )
    p.add_argument("--log-level", default=os.environ.get("K8SHOST_LOG_LEVEL", "info"))
    p.add_argument("--keep", action="store_true", help="sandbox: leave the node or cluster up afterwards")
    cluster_commands.add_arguments(p)
    sandbox_dir, prefix = sandbox_settings(os.environ)
    g = p.add_argument_group("sandbox on a cluster (--nodes 3 or more; --nodes 1: on one node, --run-dir)")
    g.add_argument("--sandbox-dir", type=Path, default=sandbox_dir,
                   help="the sandbox cluster's run dir (env K8SHOST_SANDBOX_DIR)")  # fmt: skip
    g.add_argument("--sandbox-prefix", default=prefix,
                   help="name prefix of its namespaces (env K8SHOST_SANDBOX_PREFIX)")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, json_format=False)
    # The OVN tree's programs first in PATH (nodeenv/ovn_tree.py); every command that starts a daemon
    # requires it (OvnCentral.start, ovn_stack.require_prerequisites: "run `make ovs`"), the
    # tear-down and status commands run without it.
    ovn_tree.activate(required=False)
    if args.command in cluster_commands.COMMANDS:
        return cluster_commands.run(args.command, args)
    if args.command == "sandbox-down":
        stopped = ClusterSandbox(sandbox_cluster_settings(args)).down()
        print(f"sandbox cluster down; stopped {len(stopped)} daemons")
        return 0
    if args.command == "sandbox" and args.nodes != 1:
        return sandbox_cluster(args)
    base = NodeSettings.from_env(os.environ)
    settings = NodeSettings(
        run_dir=args.run_dir.resolve(),
        bridge=args.bridge,
        system_id=base.system_id,
        encap_ip=base.encap_ip,
        install_root=base.install_root,
        ovn_central=args.ovn_central,
        runtime_dir=args.runtime_dir,
    )
    node = Node(settings, default_components(settings))
    if args.command == "up":
        node.up()
        print(f"node environment up; endpoints in {node.env_file}")
        print(node.env_file.read_text(), end="")
        return 0
    if args.command == "down":
        stopped = node.down()
        print(f"node environment down; stopped {len(stopped)} daemons: {', '.join(stopped) or '-'}")
        if node.evidence:
            print("found dead or wedged: " + "; ".join(map(str, node.faults)))
            print(f"evidence (logs, conntrack, coverage, cores, backtraces) kept in {node.evidence}")
            return 1
        return 0
    if args.command == "status":
        if node.env_file.exists() and node.check():
            print("found dead or wedged: " + "; ".join(map(str, node.faults)))
            print(f"evidence kept in {node.evidence}")
            return 1
        if node.is_up():
            print(node.env_file.read_text(), end="")
            return 0
        print("node environment is not up")
        return 1
    return run_single(node, keep=args.keep)


def sandbox_cluster_settings(args: argparse.Namespace) -> ClusterSettings:
    return ClusterSettings(
        run_dir=args.sandbox_dir.resolve(), nodes=args.nodes, prefix=args.sandbox_prefix,
        ovn_central=args.ovn_central, underlay_cidr=args.underlay_cidr, cluster_cidr=args.cluster_cidr,
        runtime_dir=args.runtime_dir,
    )  # fmt: skip


def sandbox_cluster(args: argparse.Namespace) -> int:
    try:
        if args.nodes < 3:
            raise ValueError(f"{args.nodes} nodes: the sandbox runs on one node (--nodes 1) or on 3 or more")
        settings = sandbox_cluster_settings(args)
        settings.validate()
    except ValueError as e:
        print(f"sandbox: {e}")
        return 2
    return run_cluster(settings, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
