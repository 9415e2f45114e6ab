"""Controller + informer on the API double: a 409 Conflict is retried until it converges; errors
and Events go through events.k8s.io/v1 and repeats aggregate into a series."""

from __future__ import annotations

import asyncio
from typing import Any

from controllers.machinery import (
    CONFIG_MAPS,
    EVENTS,
    Controller,
    EventRecorder,
    Informer,
    MachineryMetrics,
    RateLimiter,
    RateLimits,
    ReconcileError,
    WorkQueue,
)
from controllers.machinery.ratelimit import Backoff
from tests.integration.controllers.machinery_kit import (
    client_for,
    ensure_namespace,
    eventually,
    put_config_map,
)

NS = "ctrl-test"
USER = "system:serviceaccount:kube-system:mirror-controller"


async def test_conflict_is_retried_and_converges(kube_api: Any) -> None:
    """The reconcile writes from its cache; another writer changes the object first (409). The retry
    reads the newer cached object and converges on the latest source."""
    async with client_for(kube_api.kubeconfig) as admin, client_for(kube_api.kubeconfig_for(USER)) as client:
        await ensure_namespace(admin, NS)
        metrics = MachineryMetrics()
        informer = Informer(client, CONFIG_MAPS, namespace=NS, backoff=Backoff(0.05, 0.5), metrics=metrics)
        raced: list[bool] = []

        async def reconcile(key: str) -> None:
            obj = informer.store.get_by_key(key)
            if obj is None or obj["data"].get("mirror") == obj["data"]["source"]:
                return
            if not raced:  # another writer gets in between our read and our write
                raced.append(True)
                await put_config_map(admin, NS, "cm", source="two")
            await client.replace(
                CONFIG_MAPS, {**obj, "data": {**obj["data"], "mirror": obj["data"]["source"]}}
            )

        queue = WorkQueue("mirror", metrics=metrics, rate_limiter=RateLimiter(RateLimits(base_delay=0.01)))
        ctrl = Controller("mirror", reconcile, queue=queue, metrics=metrics)
        informer.add_handler(ctrl.enqueue_object, lambda _o, n: ctrl.enqueue_object(n))
        informer.start()
        await informer.wait_synced()
        ctrl.start()
        try:
            await put_config_map(admin, NS, "cm", source="one")
            await eventually(lambda: _mirror(informer) == "two", what="convergence on the latest source")
            conflicts = [
                r for r in kube_api.requests if r.user == USER and r.verb == "update" and r.status == 409
            ]
            assert len(conflicts) == 1
            assert (
                metrics.registry.get_sample_value(
                    "controller_reconcile_errors_total", {"controller": "mirror"}
                )
                == 1
            )
            assert queue.num_requeues(f"{NS}/cm") == 0, "success forgets the backoff"
            cm = await admin.get(CONFIG_MAPS, NS, "cm")
            assert cm["data"] == {"source": "two", "mirror": "two"}
        finally:
            await ctrl.stop()
            await informer.stop()


def _mirror(informer: Informer) -> str | None:
    obj = informer.store.get(NS, "cm")
    return None if obj is None else obj["data"].get("mirror")


async def test_events_are_recorded_and_repeats_aggregate(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as admin, client_for(kube_api.kubeconfig_for(USER)) as client:
        await ensure_namespace(admin, NS)
        cm = await put_config_map(admin, NS, "cm", source="x")
        events = EventRecorder(
            client, controller="plasmacloud.io/mirror", instance="mirror-0", flush_interval=0.1
        )
        exhausted = ("Warning", "PoolExhausted", "Allocate", "no free IP in 192.0.2.0/30")
        await asyncio.gather(*(events.record(cm, *exhausted) for _ in range(5)))  # workers at once
        for _ in range(5):
            await events.record(cm, *exhausted)
        await events.record(cm, "Normal", "Allocated", "Allocate", "192.0.2.1")
        await asyncio.sleep(0.3)
        await events.flush()
        listed = (await admin.list(EVENTS, NS))["items"]
        by_reason = {e["reason"]: e for e in listed}
        assert sorted(by_reason) == ["Allocated", "PoolExhausted"]
        warning = by_reason["PoolExhausted"]
        assert warning["type"] == "Warning"
        assert warning["regarding"]["kind"] == "ConfigMap" and warning["regarding"]["name"] == "cm"
        assert warning["regarding"]["uid"] == cm["metadata"]["uid"]
        assert warning["reportingController"] == "plasmacloud.io/mirror"
        assert warning["reportingInstance"] == "mirror-0"
        assert warning["action"] == "Allocate" and warning["note"] == "no free IP in 192.0.2.0/30"
        assert warning["eventTime"].endswith("Z")
        assert warning["series"]["count"] == 10
        assert "Allocated" in by_reason and "series" not in by_reason["Allocated"]
        writes = [r.verb for r in kube_api.requests if r.user == USER and r.resource == "events"]
        assert writes.count("create") == 2
        assert writes.count("patch") <= 3, "10 repeats cost a handful of writes, not 10"


async def test_a_crash_loop_cannot_flood_the_api(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as admin, client_for(kube_api.kubeconfig_for(USER)) as client:
        await ensure_namespace(admin, NS)
        cm = await put_config_map(admin, NS, "cm", source="x")
        events = EventRecorder(client, controller="plasmacloud.io/mirror", instance="mirror-0", window=0.0)
        for i in range(60):  # every repeat outside the window, each note different
            await events.record(cm, "Warning", f"Failed{i}", "Reconcile", f"attempt {i}")
        listed = (await admin.list(EVENTS, NS))["items"]
        assert len(listed) == 25, "per-object burst of the spam filter"


async def test_reconcile_error_becomes_a_warning_event_on_the_object(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as admin, client_for(kube_api.kubeconfig_for(USER)) as client:
        await ensure_namespace(admin, NS)
        informer = Informer(client, CONFIG_MAPS, namespace=NS)
        events = EventRecorder(client, controller="plasmacloud.io/mirror", instance="mirror-0")

        async def reconcile(key: str) -> None:
            raise ReconcileError("BadSource", "data.source is not valid")

        ctrl = Controller("mirror", reconcile, events=events, lookup=informer.store.get_by_key)
        informer.add_handler(ctrl.enqueue_object)
        informer.start()
        await informer.wait_synced()
        ctrl.start()
        try:
            cm = await put_config_map(admin, NS, "bad", source="?")
            listed: list[Any] = []

            async def poll() -> bool:
                listed[:] = (await admin.list(EVENTS, NS))["items"]
                return bool(listed)

            while not await poll():
                await asyncio.sleep(0.05)
            assert listed[0]["reason"] == "BadSource" and listed[0]["type"] == "Warning"
            assert listed[0]["regarding"]["uid"] == cm["metadata"]["uid"]
            assert listed[0]["note"] == "data.source is not valid"
        finally:
            await ctrl.stop()
            await informer.stop()
            await events.flush()
