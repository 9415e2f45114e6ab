"""project-controller: RBAC, quotas, limits and default NetworkPolicies for PlasmaCloud project namespaces,
and the AdminNetworkPolicies/BaselineAdminNetworkPolicy isolating projects (admin_policies.py)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controllers.machinery import NAMESPACES, ApiException, AppContext, ControllerApp, Informer
from controllers.netpol.acl_logging import ANNOTATION, InvalidLogSetting, parse_setting
from controllers.netpol.adminpolicy import ADMIN_NETWORK_POLICIES, ANP_GROUP, BASELINE_ADMIN_NETWORK_POLICIES
from controllers.projects.admin_policies import ISOLATION_LOGGING, AdminPolicySync
from controllers.projects.reconcile import ProjectReconciler
from controllers.projects.template import KINDS, MANAGED_BY, MANAGER, ProjectTemplate

PREFIX = "PROJECTS_"
log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    p.add_argument("--template", default=env.get(f"{PREFIX}TEMPLATE", ""),
                   help=f"YAML/JSON file overriding the quotas, LimitRange and DNS of the template "
                        f"(env {PREFIX}TEMPLATE; default: the spec's values)")  # fmt: skip
    p.add_argument("--isolation-acl-logging", type=isolation_logging_flag,
                   default=env.get(f"{PREFIX}ISOLATION_ACL_LOGGING", ISOLATION_LOGGING),
                   help="the plasmacloud.io/acl-logging annotation written on the project isolation "
                        "AdminNetworkPolicies (which verdicts of theirs the node agents log, at which "
                        f"severity); '' or 'off': not logged (env {PREFIX}ISOLATION_ACL_LOGGING; "
                        f"default: {ISOLATION_LOGGING})")  # fmt: skip


def isolation_logging_flag(value: str) -> str:
    """The annotation's value as given, checked as netpol-controller reads it ('off' -> '')."""
    if value.strip() in ("", "off"):
        return ""
    try:
        parse_setting({ANNOTATION: value})
    except InvalidLogSetting as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


async def setup(ctx: AppContext) -> None:
    template = ProjectTemplate.load(Path(ctx.args.template) if ctx.args.template else None)
    namespaces = ctx.informer(NAMESPACES)
    owned = {kind: ctx.informer(kind, label_selector=f"{MANAGED_BY}={MANAGER}") for kind in KINDS}
    reconciler = ProjectReconciler(ctx.client, namespaces.store, {k: i.store for k, i in owned.items()},
                                   template, ctx.events)  # fmt: skip
    ctrl = ctx.controller("projects", reconciler.reconcile, lookup=namespaces.store.get_by_key)
    await _admin_policies(ctx, namespaces, template)

    def by_namespace(obj: Any) -> None:
        ctrl.enqueue(obj["metadata"]["namespace"])

    namespaces.add_handler(ctrl.enqueue_object, lambda old, new: ctrl.enqueue_object(new), lambda o: None)
    for informer in owned.values():
        informer.add_handler(by_namespace, lambda old, new: by_namespace(new), by_namespace)


async def _admin_policies(ctx: AppContext, namespaces: Informer, template: ProjectTemplate) -> None:
    """The projects' AdminNetworkPolicies and the BaselineAdminNetworkPolicy (admin_policies.py), when
    the API serves their CRDs; one reconcile of the whole set per change."""
    try:
        await ctx.client.request("GET", f"/apis/{ANP_GROUP}/v1alpha1")
    except ApiException as e:
        if e.status != 404:
            raise
        log.warning("the API does not serve %s/v1alpha1: projects are isolated by their NetworkPolicies only",
                    ANP_GROUP)  # fmt: skip
        return
    label = f"{MANAGED_BY}={MANAGER}"
    anps = ctx.informer(ADMIN_NETWORK_POLICIES, label_selector=label)
    banps = ctx.informer(BASELINE_ADMIN_NETWORK_POLICIES, label_selector=label)
    sync = AdminPolicySync(ctx.client, namespaces.store, anps.store, banps.store, template,
                           ctx.args.isolation_acl_logging)  # fmt: skip
    ctrl = ctx.controller("project-admin-policies", sync.reconcile, workers=1)

    def poke(*_: Any) -> None:
        ctrl.enqueue("cluster")

    for informer in (namespaces, anps, banps):
        informer.add_handler(poke, lambda old, new: poke(), poke)


def make_app() -> ControllerApp:
    """A fresh app (tests run several in one process)."""
    return ControllerApp(
        "project-controller",
        setup,
        description="RBAC, quotas, LimitRange and NetworkPolicies for PlasmaCloud project namespaces",
        env_prefix=PREFIX,
        add_arguments=add_arguments,
    )


app = make_app()


def main(argv: Sequence[str] | None = None) -> int:
    return app.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
