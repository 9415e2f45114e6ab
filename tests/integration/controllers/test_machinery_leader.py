"""Leader election between two replicas of a controller on the API double.

Only the leader reconciles; the follower writes nothing (checked on the double's request record,
by user); a stopped (SIGTERM) leader releases the Lease and the follower takes over within the
Lease's bounds; a leader that cannot renew stops before anyone else starts.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from controllers.machinery import CONFIG_MAPS, LEASES, ControllerApp
from controllers.machinery.settings import ControllerSettings, parse
from tests.integration.controllers import machinery_demo
from tests.integration.controllers.machinery_kit import (
    client_for,
    ensure_namespace,
    eventually,
    put_config_map,
)

NS = "demo"
USER = "system:serviceaccount:kube-system:demo-{}"
LEASE = [
    "--leader-elect-lease-duration",
    "2",
    "--leader-elect-renew-deadline",
    "1.5",
    "--leader-elect-retry-period",
    "0.2",
    "--leader-elect-lease-namespace",
    "kube-system",
]
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def settings(kube_api: Any, who: str) -> ControllerSettings:
    argv = [
        "--kubeconfig",
        str(kube_api.kubeconfig_for(USER.format(who))),
        "--leader-elect-identity",
        who,
        "--metrics-address",
        "127.0.0.1:0",
        "--namespace",
        NS,
        *LEASE,
    ]
    return parse("machinery-demo", "", argv, {}, prefix="DEMO_", add_arguments=machinery_demo.add_arguments)


def writes_by(kube_api: Any, resource: str) -> list[str]:
    """Users of the successful writes to `resource`, in order."""
    return [
        r.user.removeprefix(USER.format(""))
        for r in kube_api.requests
        if r.resource == resource and r.verb in WRITES and r.status < 300
    ]


class Replica:
    def __init__(self, kube_api: Any, who: str) -> None:
        self.app = ControllerApp("machinery-demo", machinery_demo.setup, env_prefix="DEMO_")
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self.app.run(settings(kube_api, who), self.stop))

    @property
    def leading(self) -> bool:
        return self.app.elector is not None and self.app.elector.is_leader

    async def synced(self) -> None:
        await eventually(lambda: self.app.context is not None, what="setup")
        assert self.app.context is not None
        await asyncio.wait_for(self.app.context.wait_synced(), 10)

    async def terminate(self) -> int:
        self.stop.set()
        return await asyncio.wait_for(self.task, 15)


async def test_only_the_leader_reconciles_and_sigterm_hands_over(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        a = Replica(kube_api, "a")
        await eventually(lambda: a.leading, what="a leads")
        b = Replica(kube_api, "b")
        await b.synced()
        both: list[bool] = []
        watcher = asyncio.create_task(_watch_both(a, b, both))
        for i in range(5):
            await put_config_map(client, NS, f"cm-{i}", source="one")
        await eventually(lambda: _mirrored(b, "one", 5), what="5 mirrored by the leader")
        controller_writes = [u for u in writes_by(kube_api, "configmaps") if u in ("a", "b")]
        assert controller_writes == ["a"] * 5, "the follower made no write"
        assert "b" not in writes_by(kube_api, "leases"), "the follower never wrote the held Lease"

        while_following = [r for r in kube_api.requests if r.user == USER.format("b") and r.verb in WRITES]
        assert while_following == [], "the follower wrote nothing at all (no object, Event or Lease)"
        assert await a.terminate() == 0  # what SIGTERM does in main()
        lease = await client.get(LEASES, "kube-system", "machinery-demo")
        assert lease["spec"].get("holderIdentity") in (None, "", "b"), "released on the way out"
        await eventually(lambda: b.leading, timeout=2 + 1, what="b takes over within the lease duration")
        await eventually(
            lambda: (
                (machinery_demo.LEADER_TASKS.get("a"), machinery_demo.LEADER_TASKS.get("b")) == (False, True)
            ),
            what="b's leader task",
        )
        for i in range(5):
            await put_config_map(client, NS, f"cm-{i}", source="two")
        await eventually(lambda: _mirrored(b, "two", 5), what="5 mirrored by the new leader")
        controller_writes = [u for u in writes_by(kube_api, "configmaps") if u in ("a", "b")]
        assert controller_writes == ["a"] * 5 + ["b"] * 5
        lease = await client.get(LEASES, "kube-system", "machinery-demo")
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] >= 1
        assert await b.terminate() == 0
        watcher.cancel()
        assert not any(both), "two replicas led at the same time"


async def _watch_both(a: Replica, b: Replica, both: list[bool]) -> None:
    while True:
        both.append(a.leading and b.leading)
        await asyncio.sleep(0.005)


def _mirrored(replica: Replica, value: str, count: int) -> bool:
    ctx = replica.app.context
    if ctx is None:
        return False
    objs = ctx.informers[0].store.list()
    return sum(1 for o in objs if (o.get("data") or {}).get("mirror") == value) == count


async def test_follower_is_ready_with_warm_caches_and_reports_metrics(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        await put_config_map(client, NS, "cm", source="x")
        a = Replica(kube_api, "a")
        await eventually(lambda: a.leading, what="a leads")
        b = Replica(kube_api, "b")
        await b.synced()
        async with aiohttp.ClientSession() as http:
            for replica, leader in ((a, 1.0), (b, 0.0)):
                base = f"http://127.0.0.1:{replica.app.metrics_port}"
                async with http.get(f"{base}/readyz") as resp:
                    assert resp.status == 200
                async with http.get(f"{base}/healthz") as resp:
                    assert resp.status == 200
                async with http.get(f"{base}/metrics") as resp:
                    text = await resp.text()
                assert f'leader_election_master_status{{name="machinery-demo"}} {leader}' in text
                assert "workqueue_depth" in text and "controller_reconcile_duration_seconds" in text
        assert b.app.context is not None and b.app.context.informers[0].store.get(NS, "cm") is not None
        assert await a.terminate() == 0
        assert await b.terminate() == 0


async def test_sigterm_of_the_leader_process_hands_over(kube_api: Any, tmp_path: Path) -> None:
    """Two controller processes (the real caller: a Deployment's pods); SIGTERM to the leader."""
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        procs = {who: _spawn(kube_api, who, tmp_path) for who in ("p", "q")}
        try:
            holder = await _holder_eventually(client, {"p", "q"})
            other = "q" if holder == "p" else "p"
            await put_config_map(client, NS, "cm", source="one")
            await _data_eventually(client, "one", holder)
            procs[holder].send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(procs[holder].wait, 15) == 0
            assert await _holder_eventually(client, {other}, timeout=3) == other
            await put_config_map(client, NS, "cm", source="two")
            await _data_eventually(client, "two", other)
            controller_writes = [u for u in writes_by(kube_api, "configmaps") if u in ("p", "q")]
            assert controller_writes == [holder, other]
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(15)


async def test_killed_leader_is_replaced_within_the_lease_duration(kube_api: Any, tmp_path: Path) -> None:
    """SIGKILL, as when the leader's node dies: nothing releases the Lease, so the follower takes
    over once it expires (lease duration 2 s, retry 0.2 s), and it never wrote before that."""
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        procs = {who: _spawn(kube_api, who, tmp_path) for who in ("k", "m")}
        try:
            holder = await _holder_eventually(client, {"k", "m"})
            other = "m" if holder == "k" else "k"
            await put_config_map(client, NS, "cm", source="one")
            await _data_eventually(client, "one", holder)
            procs[holder].kill()
            killed_at = time.monotonic()
            assert await asyncio.to_thread(procs[holder].wait, 15) == -signal.SIGKILL
            assert await _holder_eventually(client, {other}, timeout=10) == other
            took = time.monotonic() - killed_at
            # the lease's bound (2 s + one 0.2 s retry), with room for a loaded machine; a follower
            # that waited for anything else (a release, a renew deadline of its own) would take longer
            assert took <= 2 * 2.0 + 1.0, f"handover took {took:.1f}s (lease 2 s, retry 0.2 s)"
            await put_config_map(client, NS, "cm", source="two")
            await _data_eventually(client, "two", other)
            controller_writes = [u for u in writes_by(kube_api, "configmaps") if u in ("k", "m")]
            assert controller_writes == [holder, other]
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(15)


def _spawn(kube_api: Any, who: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        machinery_demo.__file__,
        "--kubeconfig",
        str(kube_api.kubeconfig_for(USER.format(who))),
        "--leader-elect-identity",
        who,
        "--metrics-address",
        "off",
        "--namespace",
        NS,
        *LEASE,
    ]
    log = (tmp_path / f"{who}.log").open("wb")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


async def _holder_eventually(client: Any, allowed: set[str], timeout: float = 15.0) -> str:
    found: list[str] = []

    async def poll() -> None:
        while True:
            try:
                lease = await client.get(LEASES, "kube-system", "machinery-demo")
                holder = lease["spec"].get("holderIdentity")
                if holder in allowed:
                    found.append(holder)
                    return
            except Exception:
                pass
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)
    return found[0]


async def _data_eventually(client: Any, value: str, by: str) -> None:
    async def poll() -> None:
        while True:
            cm = await client.get(CONFIG_MAPS, NS, "cm")
            if (cm.get("data") or {}).get("mirror") == value:
                assert cm["data"]["by"] == by
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), 15)


async def test_a_leader_that_cannot_renew_stops_all_work_then_recovers(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        a = Replica(kube_api, "a")
        await eventually(lambda: a.leading, what="a leads")
        await put_config_map(client, NS, "before", source="x")
        await eventually(lambda: _mirrored(a, "x", 1), what="reconciled while leading")
        assert machinery_demo.LEADER_TASKS["a"] is True
        kube_api.set_fault(verb="*", resource="leases", code=500, times=10**6)
        await eventually(lambda: not a.leading, timeout=1.5 + 1, what="a steps down after the renew deadline")
        assert a.app.context is not None
        assert not any(c.running for c in a.app.context.controllers), "no worker may run without the Lease"
        assert machinery_demo.LEADER_TASKS["a"] is False, "leader tasks are cancelled"
        await put_config_map(client, NS, "during", source="x")
        await asyncio.sleep(0.5)
        assert writes_by(kube_api, "configmaps").count("a") == 1, "nothing reconciled without the Lease"
        kube_api.clear_faults()
        await eventually(lambda: a.leading, what="a leads again once the API answers")
        await eventually(lambda: _mirrored(a, "x", 2), what="the change made meanwhile is reconciled")
        assert await a.terminate() == 0
