"""A tiny controller on the machinery, run by the leader-election tests in-process and as a program.

For each ConfigMap of --namespace it copies data.source to data.mirror and stamps data.by with the
replica's Lease identity (so tests see who reconciled). Run: python machinery_demo.py --help
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping

from controllers.machinery import CONFIG_MAPS, AppContext, ControllerApp, ReconcileError

LEADER_TASKS: dict[str, bool] = {}
"""identity -> whether its run_while_leading task is running."""


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    p.add_argument(
        "--namespace",
        default=env.get("DEMO_NAMESPACE", "demo"),
        help="namespace to watch (env DEMO_NAMESPACE)",
    )


async def setup(ctx: AppContext) -> None:
    cms = ctx.informer(CONFIG_MAPS, namespace=ctx.args.namespace)

    async def reconcile(key: str) -> None:
        obj = cms.store.get_by_key(key)
        if obj is None:
            return
        data = obj.get("data") or {}
        if "source" not in data:
            return
        if data["source"] == "invalid":
            raise ReconcileError("InvalidSource", "data.source may not be 'invalid'")
        if data.get("mirror") == data["source"]:
            return
        mirrored = {**data, "mirror": data["source"], "by": ctx.settings.lease.identity}
        await ctx.client.replace(CONFIG_MAPS, {**obj, "data": mirrored})

    identity = ctx.settings.lease.identity

    async def leader_task() -> None:  # runs only while leading (tests read LEADER_TASKS)
        LEADER_TASKS[identity] = True
        try:
            await asyncio.Event().wait()
        finally:
            LEADER_TASKS[identity] = False

    ctx.run_while_leading(leader_task)
    ctrl = ctx.controller("demo", reconcile, lookup=cms.store.get_by_key)
    cms.add_handler(ctrl.enqueue_object, lambda _old, new: ctrl.enqueue_object(new), ctrl.enqueue_object)


app = ControllerApp(
    "machinery-demo",
    setup,
    env_prefix="DEMO_",
    add_arguments=add_arguments,
    description="Mirror data.source to data.mirror in ConfigMaps (machinery test).",
)

if __name__ == "__main__":
    sys.exit(app.main())
