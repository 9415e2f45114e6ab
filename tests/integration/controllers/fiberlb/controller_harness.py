"""fiberlb-controller run in-process the way its main() runs it (flags only, its own ServiceAccount
identity), against the Kubernetes API double, plus an admin client to create what users create."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from controllers.fiberlb.main import setup
from controllers.fiberlb.settings import add_arguments
from controllers.machinery import ENDPOINT_SLICES, EVENTS, SERVICES, ControllerApp, KubeClient
from controllers.machinery.kubeconfig import load_api_client
from controllers.machinery.settings import parse

SA_USER = "system:serviceaccount:kube-system:fiberlb-controller"
CLASS = "fiberlb.plasmacloud.io/lb"


class RunningController:
    def __init__(self, kube_api: Any, argv: list[str], user: str = SA_USER) -> None:
        """`user`: the identity its requests are recorded under (a second replica gets its own)."""
        self.kube_api, self.argv, self.user = kube_api, argv, user
        self.app = ControllerApp(
            "fiberlb-controller", setup, env_prefix="FIBERLB_", add_arguments=add_arguments
        )
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    async def start(self) -> RunningController:
        kubeconfig = self.kube_api.kubeconfig_for(self.user)
        argv = ["--kubeconfig", str(kubeconfig), "--metrics-address", "off", *self.argv]
        settings = parse("fiberlb-controller", "", argv, {}, prefix="FIBERLB_", add_arguments=add_arguments)
        self.task = asyncio.create_task(self.app.run(settings, self.stop_event))
        return self

    async def stop(self) -> int:
        self.stop_event.set()
        assert self.task is not None
        return await asyncio.wait_for(self.task, 30)


def service(name: str, ns: str = "default", *, ports: list[dict[str, Any]] | None = None,
            lb_class: str | None = CLASS, annotations: dict[str, str] | None = None,
            **spec: Any) -> dict[str, Any]:  # fmt: skip
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": ports or [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            **spec,
        },
    }
    if lb_class:
        body["spec"]["loadBalancerClass"] = lb_class
    return body


def endpoint_slice(service_name: str, ips: list[str], ns: str = "default", *, suffix: str = "a",
                   port_name: str = "http", port: int = 8080) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service_name}-{suffix}", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
    }  # fmt: skip


class Admin:
    """What a user (kubectl) or kube-controller-manager does: create/patch/delete objects."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    @classmethod
    async def connect(cls, kube_api: Any) -> Admin:
        return cls(KubeClient(await load_api_client(kube_api.kubeconfig, in_cluster=False)))

    async def close(self) -> None:
        await self.client.api.close()

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = ENDPOINT_SLICES if obj["kind"] == "EndpointSlice" else SERVICES
        return await self.client.create(kind, obj)

    async def replace_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return await self.client.patch(ENDPOINT_SLICES, meta["namespace"], meta["name"],
                                       {"endpoints": obj["endpoints"]})  # fmt: skip

    async def get(self, name: str, ns: str = "default") -> dict[str, Any]:
        return await self.client.get(SERVICES, ns, name)

    async def delete(self, name: str, ns: str = "default") -> None:
        await self.client.delete(SERVICES, ns, name)

    async def gone(self, name: str, ns: str = "default") -> bool:
        try:
            await self.get(name, ns)
        except Exception as e:
            return getattr(e, "status", None) == 404
        return False

    async def events(self, name: str, reason: str, ns: str = "default") -> list[dict[str, Any]]:
        items = (await self.client.list(EVENTS, ns))["items"]
        return [e for e in items if e["regarding"].get("name") == name and e["reason"] == reason]


def ingress(svc: dict[str, Any]) -> list[str]:
    return [i["ip"] for i in (svc.get("status", {}).get("loadBalancer", {}).get("ingress") or [])]


def condition(svc: dict[str, Any]) -> dict[str, Any] | None:
    conds = svc.get("status", {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "fiberlb.plasmacloud.io/LoadBalancerReady"), None)


async def until(fn: Callable[[], Awaitable[Any]], check: Callable[[Any], bool], timeout: float = 10.0) -> Any:
    """Poll fn() until check(result); returns the last result (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    while True:
        result = await fn()
        if check(result) or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.05)
