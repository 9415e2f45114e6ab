"""Two fiberlb-controller replicas with leader election (as the Deployment runs them): the follower
never writes; when the leader stops, the follower takes over and no IP moves."""

from __future__ import annotations

from typing import Any

from tests.integration.controllers.fiberlb.controller_harness import (
    SA_USER,
    Admin,
    RunningController,
    ingress,
    service,
    until,
)
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeServer

REPLICA_B = SA_USER + "-replica-b"  # its own identity, so its requests can be told apart
WRITES = {"create", "update", "patch", "delete"}


def service_writes(kube_api: Any, user: str) -> list[Any]:
    return [r for r in kube_api.requests_by(user) if r.verb in WRITES and r.resource != "leases"]


async def test_follower_never_writes_and_takes_over_without_moving_ips(
    kube_api: Any, admin: Admin, fiberlb: FakeServer
) -> None:
    flags = ["--leader-elect=true", "--leader-elect-lease-namespace=kube-system",
             "--leader-elect-retry-period=0.2", "--backend=fiberlb", *fiberlb.flags,
             "--external-ip-pool=192.168.100.10-192.168.100.30", "--debounce=0.05"]  # fmt: skip
    a = await RunningController(kube_api, flags).start()
    b = None
    try:
        await until(lambda: _lease_holder(kube_api), bool)
        b = await RunningController(kube_api, flags, user=REPLICA_B).start()
        names = [f"s{i}" for i in range(5)]
        for name in names:
            await admin.create(service(name))
        before = {
            n: ingress(await until(lambda n=n: admin.get(n), lambda s: bool(ingress(s)))) for n in names
        }
        assert service_writes(kube_api, REPLICA_B) == []  # the follower only watched
        assert await a.stop() == 0  # SIGTERM: the Lease is released
        await admin.create(service("after"))
        got = await until(lambda: admin.get("after"), lambda s: bool(ingress(s)))
        assert ingress(got) and ingress(got) not in before.values()
        assert service_writes(kube_api, REPLICA_B)  # the new leader did the work
        after = {n: ingress(await admin.get(n)) for n in names}
        assert after == before
        assert len(fiberlb.fake.lbs) == 6  # adopted, not duplicated
    finally:
        if b is not None:
            assert await b.stop() == 0
        if a.task is not None and not a.task.done():
            await a.stop()


async def _lease_holder(kube_api: Any) -> str:
    lease = kube_api.get("leases", "kube-system", "fiberlb-controller")
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")
