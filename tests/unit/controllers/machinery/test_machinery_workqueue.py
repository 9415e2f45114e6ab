"""WorkQueue: de-duplication, one worker per key, delays, backoff, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from controllers.machinery import MachineryMetrics, RateLimiter, RateLimits, WorkQueue
from controllers.machinery.ratelimit import Backoff, TokenBucket


async def test_key_added_many_times_is_processed_once() -> None:
    q = WorkQueue("t")
    for _ in range(5):
        q.add("ns/a")
    q.add("ns/b")
    assert len(q) == 2
    assert await q.get() == "ns/a"
    assert await q.get() == "ns/b"
    assert len(q) == 0


async def test_key_readded_while_processing_waits_for_done() -> None:
    q = WorkQueue("t")
    q.add("ns/a")
    key = await q.get()
    q.add("ns/a")  # changed again while a worker has it
    assert len(q) == 0, "must not be handed to a second worker while processing"
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not second.done()
    q.done(key or "")
    assert await asyncio.wait_for(second, 1) == "ns/a"


async def test_workers_never_share_a_key() -> None:
    q = WorkQueue("t")
    running: set[str] = set()
    overlaps: list[str] = []
    processed: list[str] = []

    async def worker() -> None:
        while (key := await q.get()) is not None:
            if key in running:
                overlaps.append(key)
            running.add(key)
            await asyncio.sleep(0.002)
            running.discard(key)
            processed.append(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for _ in range(50):
        for i in range(6):
            q.add(f"ns/k{i % 3}")
        await asyncio.sleep(0.001)
    while len(q) or q.processing:
        await asyncio.sleep(0.005)
    q.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == []
    assert set(processed) == {"ns/k0", "ns/k1", "ns/k2"}
    assert len(processed) < 300, "adds during processing must collapse"


async def test_add_after_orders_by_deadline_and_keeps_earliest() -> None:
    q = WorkQueue("t")
    q.add_after("ns/late", 0.06)
    q.add_after("ns/early", 0.02)
    q.add_after("ns/late", 0.5)  # a later deadline for a pending key does not postpone it
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "ns/early"
    assert await asyncio.wait_for(q.get(), 0.3) == "ns/late"


async def test_add_after_earlier_deadline_wins() -> None:
    q = WorkQueue("t")
    q.add_after("ns/a", 5)
    q.add_after("ns/a", 0.01)
    assert await asyncio.wait_for(q.get(), 1) == "ns/a"


def test_backoff_doubles_from_5ms_and_caps() -> None:
    limiter = RateLimiter(RateLimits(qps=1e9, burst=10**9))
    delays = [limiter.when("ns/a") for _ in range(20)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert delays[-1] == 1000.0
    assert max(delays) == 1000.0
    assert limiter.retries("ns/a") == 20
    assert limiter.when("ns/b") == pytest.approx(0.005), "backoff is per key"


def test_forget_resets_backoff() -> None:
    limiter = RateLimiter(RateLimits(qps=1e9, burst=10**9))
    for _ in range(6):
        limiter.when("ns/a")
    limiter.forget("ns/a")
    assert limiter.retries("ns/a") == 0
    assert limiter.when("ns/a") == pytest.approx(0.005)


def test_overall_bucket_limits_many_failing_keys() -> None:
    now = [0.0]
    limiter = RateLimiter(RateLimits(qps=10, burst=3), clock=lambda: now[0])
    first = [limiter.when(f"ns/{i}") for i in range(3)]
    assert first == pytest.approx([0.005] * 3)
    assert limiter.when("ns/x") == pytest.approx(0.1), "burst spent: wait for the next token"
    assert limiter.when("ns/y") == pytest.approx(0.2)
    now[0] = 10.0
    assert limiter.when("ns/z") == pytest.approx(0.005)


def test_token_bucket_refills() -> None:
    now = [0.0]
    bucket = TokenBucket(2.0, 1, clock=lambda: now[0])
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(0.5)
    now[0] = 5.0
    assert bucket.reserve() == 0.0


def test_reconnect_backoff_grows_with_jitter_and_resets() -> None:
    b = Backoff(initial=1.0, cap=8.0, jitter=1.0, rand=lambda: 0.5)
    assert [b.next() for _ in range(5)] == [1.5, 3.0, 6.0, 12.0, 12.0]
    b.reset()
    assert b.next() == 1.5


async def test_rate_limited_add_delays_and_counts_retries() -> None:
    metrics = MachineryMetrics()
    q = WorkQueue("t", metrics=metrics, rate_limiter=RateLimiter(RateLimits(base_delay=0.05)))
    q.add_rate_limited("ns/a")
    assert len(q) == 0
    assert q.num_requeues("ns/a") == 1
    assert await asyncio.wait_for(q.get(), 1) == "ns/a"
    assert metrics.registry.get_sample_value("workqueue_retries_total", {"name": "t"}) == 1
    assert metrics.registry.get_sample_value("workqueue_adds_total", {"name": "t"}) == 1
    q.forget("ns/a")
    assert q.num_requeues("ns/a") == 0


async def test_depth_metric_follows_the_queue() -> None:
    metrics = MachineryMetrics()
    q = WorkQueue("d", metrics=metrics)
    for k in ("a", "b", "a"):
        q.add(k)
    assert metrics.registry.get_sample_value("workqueue_depth", {"name": "d"}) == 2
    await q.get()
    assert metrics.registry.get_sample_value("workqueue_depth", {"name": "d"}) == 1


async def test_shutdown_wakes_waiting_workers_and_drops_new_adds() -> None:
    q = WorkQueue("t")
    waiting = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.add_after("ns/later", 0.01)
    q.shutdown()
    assert await asyncio.gather(*waiting) == [None, None, None]
    q.add("ns/a")
    await asyncio.sleep(0.03)
    assert len(q) == 0
    assert await q.get() is None


async def test_shutdown_with_drain_hands_out_queued_keys_then_none() -> None:
    q = WorkQueue("t")
    q.add("ns/a")
    q.add("ns/b")
    q.shutdown(drain=True)
    assert [await q.get(), await q.get(), await q.get()] == ["ns/a", "ns/b", None]


async def test_wait_idle_waits_for_in_flight_keys() -> None:
    q = WorkQueue("t")
    q.add("ns/a")
    key = await q.get()
    q.shutdown()
    idle = asyncio.create_task(q.wait_idle())
    await asyncio.sleep(0.01)
    assert not idle.done()
    q.done(key or "")
    await asyncio.wait_for(idle, 1)


async def test_cancelled_waiter_does_not_lose_a_key() -> None:
    q = WorkQueue("t")
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("ns/a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "ns/a"


async def test_work_duration_and_in_flight_gauges_follow_a_worker() -> None:
    metrics = MachineryMetrics()
    q = WorkQueue("w", metrics=metrics)

    def sample(name: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"name": "w"})

    assert sample("workqueue_longest_running_processor_seconds") == 0
    q.add("ns/a")
    q.add("ns/b")
    assert await q.get() == "ns/a"
    await asyncio.sleep(0.05)
    assert await q.get() == "ns/b"
    await asyncio.sleep(0.02)
    longest = sample("workqueue_longest_running_processor_seconds")
    unfinished = sample("workqueue_unfinished_work_seconds")
    assert longest is not None and 0.07 <= longest < 1
    assert unfinished is not None and unfinished >= longest + 0.02  # both keys' time in progress
    q.done("ns/a")
    assert sample("workqueue_work_duration_seconds_count") == 1
    work_sum = sample("workqueue_work_duration_seconds_sum")
    assert work_sum is not None and work_sum >= 0.07
    q.done("ns/b")
    assert sample("workqueue_work_duration_seconds_count") == 2
    assert sample("workqueue_longest_running_processor_seconds") == 0
    assert sample("workqueue_unfinished_work_seconds") == 0
