"""k8shost-node: start/stop the embedded node environment, or run the sandbox scenario.

k8shost-node up        start OVS/OVN (and the suite's daemons) in .run/, write .run/node.env
k8shost-node down      stop exactly what `up` started (by PID) and remove .run/
k8shost-node status    say whether the environment is up and print node.env
k8shost-node sandbox   up, the scenario (a table of steps), down
k8shost-node cluster-up      start N nodes (network namespaces) over a Geneve underlay, OVN central
                             and the API double; write .run-cluster/cluster.{json,env} and one
                             node.env per node
k8shost-node cluster-down    stop the cluster by PID, delete its namespaces, remove its run dir
k8shost-node cluster-status  say whether the cluster is up and print cluster.env
k8shost-node cluster-join    one more node joins the running cluster (the next node name)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from common.jsonlog import setup_logging
from nodeenv.cluster import commands as cluster_commands
from nodeenv.components import default_components
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_central import MODES
from nodeenv.scenario import Scenario
from nodeenv.scenarios import SCENARIOS

log = logging.getLogger("nodeenv")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="k8shost-node", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=["up", "down", "status", "sandbox", *cluster_commands.COMMANDS])
    d = NodeSettings.from_env(os.environ)
    p.add_argument("--run-dir", type=Path, default=d.run_dir, help="private run dir (env K8SHOST_RUN_DIR)")
    p.add_argument("--bridge", default=d.bridge, help="OVN integration bridge (env K8SHOST_BRIDGE)")
    p.add_argument(
        "--ovn-central",
        choices=MODES,
        default=d.ovn_central,
        help="OVN central (node and cluster): standalone databases, or 3-member RAFT clusters with "
        "two northd (env K8SHOST_OVN_CENTRAL)",
    )
    p.add_argument("--log-level", default=os.environ.get("K8SHOST_LOG_LEVEL", "info"))
    p.add_argument("--keep", action="store_true", help="sandbox: leave the node up afterwards")
    cluster_commands.add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, json_format=False)
    if args.command in cluster_commands.COMMANDS:
        return cluster_commands.run(args.command, args)
    base = NodeSettings.from_env(os.environ)
    settings = NodeSettings(
        run_dir=args.run_dir.resolve(),
        bridge=args.bridge,
        system_id=base.system_id,
        encap_ip=base.encap_ip,
        install_root=base.install_root,
        ovn_central=args.ovn_central,
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
    return sandbox(node, keep=args.keep)


def sandbox(node: Node, *, keep: bool = False) -> int:
    scn = Scenario(node)
    ok = True
    try:
        with scn.step("node-up"):
            node.up()
        for part in SCENARIOS:
            part.run(scn)
    except Exception:
        ok = False
    finally:
        errors = scn.run_cleanups()
        if not keep:
            with scn.step("node-down"):
                node.down()
    print(scn.table())
    for e in errors:
        print(f"cleanup error: {e}", file=sys.stderr)
    print("sandbox: PASSED" if ok and not errors else "sandbox: FAILED")
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
