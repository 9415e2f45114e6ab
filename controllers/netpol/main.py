"""netpol-controller: NetworkPolicies as OVN ACLs over port groups and address sets."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from controllers.machinery import (
    NAMESPACES,
    NETWORK_POLICIES,
    NODES,
    PODS,
    ApiException,
    AppContext,
    ControllerApp,
)
from controllers.netpol.admin_status import AdminStatus
from controllers.netpol.adminpolicy import ADMIN_NETWORK_POLICIES, ANP_GROUP, BASELINE_ADMIN_NETWORK_POLICIES
from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.reconcile import (
    CLUSTER_KEY,
    AdminStores,
    NetpolMetrics,
    NetpolReconciler,
    labels_changed,
    logging_changed,
    node_changed,
    pod_changed,
)
from controllers.netpol.settings import PREFIX, NetpolSettings, add_arguments
from ovnaccess import tls
from ovnaccess.metrics import OvsdbClientMetrics

log = logging.getLogger(__name__)


async def setup(ctx: AppContext) -> None:
    s = NetpolSettings.from_args(ctx.args)
    tls.use(s.ovn_tls)
    nb = await asyncio.to_thread(lambda: PolicyNorthbound(s.ovn_nb_db, log_rate=s.acl_log_rate))

    async def close() -> None:
        await asyncio.to_thread(nb.close)

    ctx.on_cleanup(close)
    policies, pods, namespaces = ctx.informer(NETWORK_POLICIES), ctx.informer(PODS), ctx.informer(NAMESPACES)
    metrics = NetpolMetrics(ctx.metrics.registry)
    OvsdbClientMetrics(ctx.metrics.registry).watch(nb.db, "OVN_Northbound")
    admin, informers = None, []
    if await _serves_admin_policies(ctx):
        informers = [ctx.informer(ADMIN_NETWORK_POLICIES), ctx.informer(BASELINE_ADMIN_NETWORK_POLICIES)]
        nodes = ctx.informer(NODES)
        admin = AdminStores(informers[0].store, informers[1].store, nodes.store, AdminStatus(ctx.client))
    reconciler = NetpolReconciler(nb, policies.store, pods.store, namespaces.store, events=ctx.events,
                                  priorities=s.priorities, metrics=metrics, admin=admin)  # fmt: skip
    ctrl = ctx.controller("netpol", reconciler.reconcile, workers=1)

    def poke(*_: Any) -> None:
        metrics.changed()
        ctrl.enqueue(CLUSTER_KEY)

    def when(changed: Any) -> Any:
        return lambda old, new: poke() if changed(old, new) else None

    policies.add_handler(poke, lambda old, new: poke(), poke)
    for informer in informers:
        informer.add_handler(poke, lambda old, new: poke() if _spec_changed(old, new) else None, poke)
    if admin is not None:
        nodes.add_handler(poke, when(node_changed), poke)
    pods.add_handler(poke, when(pod_changed), poke)
    namespaces.add_handler(poke, when(lambda o, n: labels_changed(o, n) or logging_changed(o, n)), poke)
    loop = asyncio.get_running_loop()

    def nb_changed() -> None:  # on the IDL thread: a logical port, or one of our rows
        loop.call_soon_threadsafe(poke)

    nb.on_change(nb_changed)
    nb.on_replaced(nb_changed)  # the NB replaced by an empty one: every row of ours written again


async def _serves_admin_policies(ctx: AppContext) -> bool:
    """Whether the API serves policy.networking.k8s.io/v1alpha1 (daemonsets/policy's CRDs installed);
    without them NetworkPolicies are still enforced, and a restart picks the CRDs up."""
    try:
        await ctx.client.request("GET", f"/apis/{ANP_GROUP}/v1alpha1")
    except ApiException as e:
        if e.status != 404:
            raise
        log.warning("the API does not serve %s/v1alpha1 (its CRDs are not installed): AdminNetworkPolicies "
                    "are not enforced until netpol-controller restarts with them", ANP_GROUP)  # fmt: skip
        return False
    return True


def _spec_changed(old: Any, new: Any) -> bool:
    """Our own status writes do not wake a reconcile (a status someone else rewrote is mended at the next)."""
    return bool(old.get("spec") != new.get("spec"))


def make_app() -> ControllerApp:
    """A fresh app (tests run several in one process)."""
    return ControllerApp(
        "netpol-controller",
        setup,
        description="Translate NetworkPolicies, AdminNetworkPolicies and the BaselineAdminNetworkPolicy into "
        "OVN ACLs (one leader writes the NB)",
        env_prefix=PREFIX,
        add_arguments=add_arguments,
    )


app = make_app()


def main(argv: Sequence[str] | None = None) -> int:
    return app.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
