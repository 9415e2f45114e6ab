"""project-controller: RBAC, quotas, limits and default NetworkPolicies for PlasmaCloud project namespaces."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controllers.machinery import NAMESPACES, AppContext, ControllerApp
from controllers.projects.reconcile import ProjectReconciler
from controllers.projects.template import KINDS, MANAGED_BY, MANAGER, ProjectTemplate

PREFIX = "PROJECTS_"


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    p.add_argument("--template", default=env.get(f"{PREFIX}TEMPLATE", ""),
                   help=f"YAML/JSON file overriding the quotas, LimitRange and DNS of the template "
                        f"(env {PREFIX}TEMPLATE; default: the spec's values)")  # fmt: skip


async def setup(ctx: AppContext) -> None:
    template = ProjectTemplate.load(Path(ctx.args.template) if ctx.args.template else None)
    namespaces = ctx.informer(NAMESPACES)
    owned = {kind: ctx.informer(kind, label_selector=f"{MANAGED_BY}={MANAGER}") for kind in KINDS}
    reconciler = ProjectReconciler(ctx.client, namespaces.store, {k: i.store for k, i in owned.items()},
                                   template, ctx.events)  # fmt: skip
    ctrl = ctx.controller("projects", reconciler.reconcile, lookup=namespaces.store.get_by_key)

    def by_namespace(obj: Any) -> None:
        ctrl.enqueue(obj["metadata"]["namespace"])

    namespaces.add_handler(ctrl.enqueue_object, lambda old, new: ctrl.enqueue_object(new), lambda o: None)
    for informer in owned.values():
        informer.add_handler(by_namespace, lambda old, new: by_namespace(new), by_namespace)


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
