"""The event recorder's caches stay bounded by what is live: series not seen for a window and
spam-filter buckets that are full again are forgotten. Before, both held every object ever
reported on (up to 4096), e.g. each project namespace project-controller ever served; the 30-minute
soak saw project-controller's RSS grow by ~9 MB/h."""

from __future__ import annotations

from typing import Any

from controllers.machinery.events import EventRecorder


class Api:
    """Records the writes an EventRecorder makes (KubeClient's create/patch)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []

    async def create(self, kind: Any, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.writes.append(("create", namespace))
        return obj

    async def patch(self, kind: Any, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("patch", namespace))
        return patch


def namespace(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"proj-{i}", "uid": f"uid-{i}"}}


async def test_series_and_buckets_of_objects_gone_quiet_are_forgotten() -> None:
    now = [1000.0]
    rec = EventRecorder(Api(), controller="c", instance="i", window=360, refill_seconds=300, burst=25,
                        clock=lambda: now[0])  # type: ignore[arg-type]  # fmt: skip
    for i in range(200):  # 200 projects, one event each, 10 s apart
        await rec.record(namespace(i), "Normal", "Provisioned", "Provision", "ok")
        now[0] += 10
    # within a window only the last 36 series can still aggregate; a bucket refills in 300 x 25 s
    assert len(rec._series) <= 37
    assert len(rec._buckets) == 200
    now[0] += 300 * 25
    await rec.record(namespace(999), "Normal", "Provisioned", "Provision", "ok")
    assert len(rec._series) == 1 and len(rec._buckets) == 1


async def test_a_live_series_and_a_draining_bucket_are_kept() -> None:
    now = [0.0]
    api = Api()
    rec = EventRecorder(api, controller="c", instance="i", window=360, flush_interval=60, burst=2,
                        refill_seconds=300, clock=lambda: now[0])  # type: ignore[arg-type]  # fmt: skip
    ns = namespace(1)
    for _ in range(3):  # burst 2: the third distinct reason is dropped by the spam filter
        await rec.record(ns, "Warning", f"Failed{_}", "Reconcile", "x")
    assert api.writes == [("create", "default"), ("create", "default")]
    now[0] += 500  # older than the window, but the bucket is not full again (needs 600 s)
    await rec.record(namespace(2), "Normal", "Provisioned", "Provision", "ok")
    assert "uid-1" in rec._buckets, "a bucket still refilling is kept: forgetting it would reset the filter"
