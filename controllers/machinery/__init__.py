"""Shared controller machinery: informers, work queue, controllers, leader election, Events, app.

Modelled on client-go (informer/workqueue/leaderelection/tools/events), on kubernetes_asyncio.
Objects are plain JSON dicts exactly as the API serves them; keys are "namespace/name" (or
"name" for cluster-scoped kinds). Typical controller:

    async def setup(ctx: AppContext) -> None:
        services = ctx.informer(SERVICES)
        slices = ctx.informer(ENDPOINT_SLICES)
        slices.add_index("service", by_label("kubernetes.io/service-name"))
        ctrl = ctx.controller("fiberlb", reconcile, lookup=services.store.get_by_key)
        services.add_handler(ctrl.enqueue_object, lambda old, new: ctrl.enqueue_object(new),
                             ctrl.enqueue_object)
        ...

    app = ControllerApp("fiberlb-controller", setup, env_prefix="FIBERLB_")
    main = app.main

Modules: kinds (Kind table, keys), store (cache + indexes), informer (list+watch), ratelimit
(backoff, token bucket), workqueue, controller, leader (Lease election), events (events.k8s.io/v1
recorder), rest (plain-dict API calls on the ApiClient), kubeconfig, settings (flags), health
(/metrics /healthz /readyz), metrics (prometheus), app (ControllerApp).
"""

from controllers.machinery.app import AppContext, ControllerApp, Setup
from controllers.machinery.controller import Controller, ReconcileError
from controllers.machinery.events import EventRecorder, micro_time, object_reference
from controllers.machinery.informer import Informer
from controllers.machinery.kinds import (
    ALL_KINDS,
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIG_MAPS,
    CORE_EVENTS,
    ENDPOINT_SLICES,
    ENDPOINTS,
    EVENTS,
    LEASES,
    LIMIT_RANGES,
    NAMESPACES,
    NETWORK_POLICIES,
    NODES,
    PODS,
    RESOURCE_QUOTAS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    Kind,
    object_key,
    split_key,
)
from controllers.machinery.leader import LeaderElector, LeaseSettings
from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.ratelimit import Backoff, RateLimiter, RateLimits
from controllers.machinery.rest import ApiException, KubeClient
from controllers.machinery.settings import ControllerSettings
from controllers.machinery.store import KubeObject, Store, by_label, by_namespace
from controllers.machinery.workqueue import WorkQueue

__all__ = [
    "ALL_KINDS",
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "CONFIG_MAPS",
    "CORE_EVENTS",
    "ENDPOINTS",
    "ENDPOINT_SLICES",
    "EVENTS",
    "LEASES",
    "LIMIT_RANGES",
    "NAMESPACES",
    "NETWORK_POLICIES",
    "NODES",
    "PODS",
    "RESOURCE_QUOTAS",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "ApiException",
    "AppContext",
    "Backoff",
    "Controller",
    "ControllerApp",
    "ControllerSettings",
    "EventRecorder",
    "Informer",
    "Kind",
    "KubeClient",
    "KubeObject",
    "LeaderElector",
    "LeaseSettings",
    "MachineryMetrics",
    "RateLimiter",
    "RateLimits",
    "ReconcileError",
    "Setup",
    "Store",
    "WorkQueue",
    "by_label",
    "by_namespace",
    "micro_time",
    "object_key",
    "object_reference",
    "split_key",
]
