"""node-controller: what a deleted Node held in OVN is released cluster-wide.

It also removes a node's stale chassis: a node reinstalled under its old name comes back with a
new OVS system-id, and its old Chassis (same hostname, same Encap address) would keep the new one out
of the SB (its Encap's (type, ip) is taken). The node's agent writes the chassis it is now on its
management port (`prismnet.chassis`); this controller, on that change and on every sweep, deletes
every other chassis of that node's name (controllers/nodes/release.py), as ovn-kubernetes' cluster
manager does from its node-chassis-id annotation: the nodes themselves never delete SB rows.

When a Node leaves the API (the admin's `kubectl delete node`, or a cloud controller), its PrismNET
agent and ovn-controller are gone with it and cannot clean up: its chassis would keep tunnels
pointed at it, its pods' ports would hold their addresses, its egress policy would reroute to a
dead management port. This controller (one leader, like ovn-kubernetes' cluster manager) removes
all of it (controllers/nodes/release.py) when a Node is deleted, and at start for every node whose
agent left state in the NB that the API does not list. It never acts while the API lists no Node
at all (a wrong kubeconfig or RBAC would otherwise release the whole cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from cni.management import K_CHASSIS
from controllers.machinery import NODES, AppContext, ControllerApp
from controllers.nodes.release import OvnNodes
from ovnaccess import tls
from ovnaccess.metrics import OvsdbClientMetrics
from ovnaccess.tls import OvnTls

PREFIX = "NODES_"
SWEEP, DELETED, CHASSIS = "sweep", "deleted/", "chassis"
log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    for flag, var, default, what in (
        ("--ovn-nb-db", "OVN_NB_DB", "unix:/run/ovn/ovnnb_db.sock", "northbound"),
        ("--ovn-sb-db", "OVN_SB_DB", "unix:/run/ovn/ovnsb_db.sock", "southbound"),
    ):
        p.add_argument(flag, default=env.get(PREFIX + var, default),
                       help=f"OVN {what} database, a remote or a RAFT cluster's remote list "
                            f"(env {PREFIX}{var}; default {default})")  # fmt: skip
    tls.add_arguments(p, env)


def released_counter(registry: CollectorRegistry) -> Counter:
    return Counter("prismnet_nodes_released", "Nodes whose OVN state was released", registry=registry)


async def setup(ctx: AppContext) -> None:
    tls.use(OvnTls.from_args(ctx.args))
    ovn = await asyncio.to_thread(OvnNodes, ctx.args.ovn_nb_db, ctx.args.ovn_sb_db)

    async def close() -> None:
        await asyncio.to_thread(ovn.close)

    ctx.on_cleanup(close)
    ovsdb = OvsdbClientMetrics(ctx.metrics.registry)
    ovsdb.watch(ovn.nb, "OVN_Northbound")
    ovsdb.watch(ovn.sb, "OVN_Southbound")
    nodes = ctx.informer(NODES)
    released = released_counter(ctx.metrics.registry)

    async def sweep(key: str) -> None:
        present = {n["metadata"]["name"] for n in nodes.store.list()}
        if not present:
            log.warning("the API lists no Node: releasing nothing (check the kubeconfig and RBAC)")
            return
        deleted = [key.removeprefix(DELETED)] if key.startswith(DELETED) else []
        # an agent's report releases nothing: a running agent writes back what its deleted Node held
        # (its pods still run), and a release on each of its reports would never end
        if key != CHASSIS:
            for _ in await asyncio.to_thread(ovn.release_absent, present, deleted):
                released.inc()
        await asyncio.to_thread(ovn.remove_stale_chassis, present)  # each logged (a warning)

    ctrl = ctx.controller("nodes", sweep, workers=1)
    loop = asyncio.get_running_loop()

    def chassis_reported(event: str, row: Any) -> None:  # the NB's IDL thread
        if event != "delete" and K_CHASSIS in getattr(row, "external_ids", {}):
            with contextlib.suppress(RuntimeError):  # the loop closed: the controller is stopping
                loop.call_soon_threadsafe(ctrl.enqueue, CHASSIS)

    ovn.nb.on_row_change("Logical_Switch_Port", chassis_reported)

    def added(_: Any) -> None:
        ctrl.enqueue(SWEEP)

    def deleted(node: Any) -> None:
        ctrl.enqueue(DELETED + node["metadata"]["name"])

    nodes.add_handler(added, None, deleted)  # the start's sweep, and one per deleted Node


def make_app() -> ControllerApp:
    """A fresh app (tests run several in one process)."""
    return ControllerApp(
        "node-controller",
        setup,
        description="Release what a deleted Node held in OVN: chassis, ports, addresses, egress policy",
        env_prefix=PREFIX,
        add_arguments=add_arguments,
    )


app = make_app()


def main(argv: Sequence[str] | None = None) -> int:
    return app.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
