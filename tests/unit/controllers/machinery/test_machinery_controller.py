"""Controller: retries with backoff until success, forget on success, stop modes, metrics."""

from __future__ import annotations

import asyncio

from controllers.machinery import Controller, MachineryMetrics, RateLimiter, RateLimits, WorkQueue


def fast_queue(name: str, metrics: MachineryMetrics) -> WorkQueue:
    return WorkQueue(name, metrics=metrics, rate_limiter=RateLimiter(RateLimits(base_delay=0.001)))


async def test_failures_retry_until_success_then_backoff_is_forgotten() -> None:
    metrics = MachineryMetrics()
    calls: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        calls.append(key)
        if len(calls) < 4:
            raise RuntimeError("backend unavailable")
        done.set()

    ctrl = Controller("c", reconcile, workers=2, metrics=metrics, queue=fast_queue("c", metrics))
    ctrl.start()
    ctrl.enqueue("ns/a")
    await asyncio.wait_for(done.wait(), 2)
    await ctrl.stop()
    assert calls == ["ns/a"] * 4
    assert ctrl.queue.num_requeues("ns/a") == 0
    assert metrics.registry.get_sample_value("controller_reconcile_errors_total", {"controller": "c"}) == 3
    count = metrics.registry.get_sample_value(
        "controller_reconcile_duration_seconds_count", {"controller": "c"}
    )
    assert count == 4


async def test_returned_delay_requeues_the_key() -> None:
    seen: list[float] = []

    async def reconcile(key: str) -> float | None:
        seen.append(asyncio.get_running_loop().time())
        return 0.05 if len(seen) < 2 else None

    ctrl = Controller("c", reconcile)
    ctrl.start()
    ctrl.enqueue("ns/a")
    while len(seen) < 2:
        await asyncio.sleep(0.01)
    await ctrl.stop()
    assert seen[1] - seen[0] >= 0.045


async def test_graceful_stop_lets_in_flight_reconcile_finish() -> None:
    started, finished = asyncio.Event(), asyncio.Event()

    async def reconcile(key: str) -> None:
        started.set()
        await asyncio.sleep(0.05)
        finished.set()

    ctrl = Controller("c", reconcile, workers=3)
    ctrl.start()
    ctrl.enqueue("ns/a")
    await started.wait()
    await ctrl.stop(graceful=True)
    assert finished.is_set()
    assert not ctrl.running


async def test_hard_stop_cancels_in_flight_and_keeps_the_key_for_later() -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def reconcile(key: str) -> None:
        started.set()
        await asyncio.sleep(5)
        finished.append(key)

    ctrl = Controller("c", reconcile)
    ctrl.start()
    ctrl.enqueue("ns/a")
    await started.wait()
    await asyncio.wait_for(ctrl.stop(graceful=False), 1)
    assert finished == []
    assert len(ctrl.queue) == 1, "the interrupted key is reconciled by whoever leads next"
    assert not ctrl.queue.processing


async def test_restart_after_stop_processes_keys_queued_meanwhile() -> None:
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)

    ctrl = Controller("c", reconcile)
    ctrl.enqueue("ns/a")  # a follower's informers fill the queue ...
    ctrl.enqueue("ns/b")
    await asyncio.sleep(0.01)
    assert seen == []  # ... nothing runs until it leads
    ctrl.start()
    while len(seen) < 2:
        await asyncio.sleep(0.005)
    await ctrl.stop()
    assert sorted(seen) == ["ns/a", "ns/b"]
