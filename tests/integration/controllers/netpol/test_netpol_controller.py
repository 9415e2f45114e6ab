"""netpol-controller as it runs: its service account on the API double, the real NB, real traffic."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controllers.machinery import NETWORK_POLICIES, PODS, ControllerApp, KubeClient
from controllers.machinery.settings import parse
from controllers.netpol.main import make_app
from controllers.netpol.settings import PREFIX, add_arguments
from tests.integration.controllers.machinery_kit import eventually
from tests.integration.controllers.netpol.conftest import Cluster
from tests.integration.controllers.netpol.traffic import reaches

pytestmark = [pytest.mark.root, pytest.mark.ovn]
SA = "system:serviceaccount:kube-system:netpol-controller"


class Running:
    def __init__(self, kube_api: Any, cluster: Cluster) -> None:
        self.kube_api, self.cluster = kube_api, cluster
        self.app: ControllerApp | None = None
        self.task: asyncio.Task[int] | None = None
        self.stop = asyncio.Event()

    async def start(self) -> None:
        nb = self.cluster.agent.node.endpoints["OVN_NB_DB"]
        argv = ["--kubeconfig", str(self.kube_api.kubeconfig_for(SA)), "--leader-elect=false",
                "--metrics-address=off", "--ovn-nb-db", nb]  # fmt: skip
        settings = parse("netpol-controller", "", argv, {}, prefix=PREFIX, add_arguments=add_arguments)
        self.stop, self.app = asyncio.Event(), make_app()
        self.task = asyncio.create_task(self.app.run(settings, self.stop))
        await eventually(lambda: self.app is not None and self.app.is_leader, what="controller running")

    async def halt(self) -> None:
        self.stop.set()
        assert self.task is not None and await asyncio.wait_for(self.task, 30) == 0


def policy(name: str, ingress: list[Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": "np-a", "name": name},
            "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": ingress}}  # fmt: skip


def allowed(c: Cluster, src: str, proto: str, port: int) -> bool:
    return reaches(c.pods[src].netns, c.pods["np-a/web"].ip, proto, port)


async def wait_reach(c: Cluster, src: str, proto: str, port: int, want: bool) -> None:
    await eventually(lambda: allowed(c, src, proto, port) is want, timeout=10, what=f"{src} {port} {want}")


async def test_policy_lifecycle_invalid_update_and_restart(
    kube_api: Any, cluster: Cluster, api: KubeClient
) -> None:
    run = Running(kube_api, cluster)
    await run.start()
    try:
        fe_8080 = [{"from": [{"podSelector": {"matchLabels": {"app": "fe"}}}], "ports": [{"port": 8080}]}]
        await api.create(NETWORK_POLICIES, policy("web", fe_8080))
        await wait_reach(cluster, "np-a/fe", "tcp", 9000, False)  # enforced
        assert allowed(cluster, "np-a/fe", "tcp", 8080)

        # a pod's labels change in the API: it leaves the peers
        fe = await api.get(PODS, "np-a", "fe")
        await api.replace(PODS, {**fe, "metadata": {**fe["metadata"], "labels": {"app": "gone"}}})
        await wait_reach(cluster, "np-a/fe", "tcp", 8080, False)
        fe = await api.get(PODS, "np-a", "fe")
        await api.replace(PODS, {**fe, "metadata": {**fe["metadata"], "labels": {"app": "fe"}}})
        await wait_reach(cluster, "np-a/fe", "tcp", 8080, True)

        # an invalid update: Event, and OVN keeps the previous state (still isolated, still allowed)
        current = await api.get(NETWORK_POLICIES, "np-a", "web")
        bad = [{"from": [{"ipBlock": {"cidr": "10.0.0.0/40"}}]}]
        await api.replace(NETWORK_POLICIES, {**current, "spec": {**current["spec"], "ingress": bad}})

        def invalid() -> list[str]:
            events = kube_api.objects("events.events.k8s.io", "np-a")
            return [
                e.get("note") or e.get("message", "")
                for e in events
                if e.get("reason") == "InvalidNetworkPolicy"
            ]

        await eventually(invalid, what="an InvalidNetworkPolicy Event")
        assert "not a CIDR" in invalid()[0]
        cluster.sync()
        assert allowed(cluster, "np-a/fe", "tcp", 8080) and not allowed(cluster, "np-a/fe", "tcp", 9000)

        # restart: the new controller rebuilds from the API as a diff (fixed policy -> same rows)
        await run.halt()
        current = await api.get(NETWORK_POLICIES, "np-a", "web")
        await api.replace(NETWORK_POLICIES, {**current, "spec": {**current["spec"], "ingress": fe_8080}})
        before = cluster.nb.counts()
        await run.start()
        await asyncio.sleep(0.5)
        await eventually(lambda: run.app is not None and _reconciled(run.app), what="first reconcile")
        assert cluster.nb.counts() == before
        assert not allowed(cluster, "np-a/fe", "tcp", 9000)

        await api.delete(NETWORK_POLICIES, "np-a", "web")
        await wait_reach(cluster, "np-a/fe", "tcp", 9000, True)
        await eventually(lambda: cluster.nb.counts()["port_groups"] == 0, what="rows removed")
    finally:
        await run.halt()
    ours = {r.resource for r in kube_api.requests_by(SA) if r.verb in ("create", "update", "patch", "delete")}
    assert ours == {"events"}  # the controller writes OVN, never the API objects it reads


def _reconciled(app: ControllerApp) -> bool:
    ctx = app.context
    return ctx is not None and all(len(c.queue) == 0 for c in ctx.controllers)
