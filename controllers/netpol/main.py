"""netpol-controller: NetworkPolicies as OVN ACLs over port groups and address sets."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from controllers.machinery import NAMESPACES, NETWORK_POLICIES, PODS, AppContext, ControllerApp
from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.reconcile import (
    CLUSTER_KEY,
    NetpolMetrics,
    NetpolReconciler,
    labels_changed,
    logging_changed,
    pod_changed,
)
from controllers.netpol.settings import PREFIX, NetpolSettings, add_arguments
from ovnaccess import tls


async def setup(ctx: AppContext) -> None:
    s = NetpolSettings.from_args(ctx.args)
    tls.use(s.ovn_tls)
    nb = await asyncio.to_thread(lambda: PolicyNorthbound(s.ovn_nb_db, log_rate=s.acl_log_rate))

    async def close() -> None:
        await asyncio.to_thread(nb.close)

    ctx.on_cleanup(close)
    policies, pods, namespaces = ctx.informer(NETWORK_POLICIES), ctx.informer(PODS), ctx.informer(NAMESPACES)
    metrics = NetpolMetrics(ctx.metrics.registry)
    reconciler = NetpolReconciler(nb, policies.store, pods.store, namespaces.store, events=ctx.events,
                                  priorities=s.priorities, metrics=metrics)  # fmt: skip
    ctrl = ctx.controller("netpol", reconciler.reconcile, workers=1)

    def poke(*_: Any) -> None:
        ctrl.enqueue(CLUSTER_KEY)

    def when(changed: Any) -> Any:
        return lambda old, new: poke() if changed(old, new) else None

    policies.add_handler(poke, lambda old, new: poke(), poke)
    pods.add_handler(poke, when(pod_changed), poke)
    namespaces.add_handler(poke, when(lambda o, n: labels_changed(o, n) or logging_changed(o, n)), poke)
    loop = asyncio.get_running_loop()

    def nb_changed() -> None:  # on the IDL thread: a logical port, or one of our rows
        loop.call_soon_threadsafe(poke)

    nb.on_change(nb_changed)


def make_app() -> ControllerApp:
    """A fresh app (tests run several in one process)."""
    return ControllerApp(
        "netpol-controller",
        setup,
        description="Translate networking.k8s.io/v1 NetworkPolicies into OVN ACLs (one leader writes the NB)",
        env_prefix=PREFIX,
        add_arguments=add_arguments,
    )


app = make_app()


def main(argv: Sequence[str] | None = None) -> int:
    return app.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
