"""The flashdns controller run in-process on the API double, as `flashdns-controller` runs it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controllers.flashdns.main import app as flashdns_app
from controllers.machinery import PODS, ControllerApp, KubeClient, KubeObject
from controllers.machinery.settings import parse

SA = "system:serviceaccount:kube-system:flashdns-controller"


@dataclass
class Running:
    app: ControllerApp
    port: int

    def reconciles(self, controller: str = "flashdns-services") -> float:
        assert self.app.context is not None
        value = self.app.context.metrics.registry.get_sample_value(
            "controller_reconcile_duration_seconds_count", {"controller": controller}
        )
        return value or 0.0


@asynccontextmanager
async def flashdns_controller(kubeconfig: Path, tmp: Path, *args: str) -> AsyncIterator[Running]:
    """Start the controller (its own flags, env-free) and wait until its DNS server listens."""
    port_file = tmp / f"dns-port-{len(list(tmp.iterdir()))}.json"
    argv = ["--kubeconfig", str(kubeconfig), "--leader-elect=false", "--metrics-address", "127.0.0.1:0",
            "--dns-address", "127.0.0.1:0", "--dns-port-file", str(port_file), "--upstreams", "none",
            "--debounce", "0.2", *args]  # fmt: skip
    settings = parse(
        "flashdns-controller", "", argv, {}, prefix="FLASHDNS_", add_arguments=flashdns_app.add_arguments
    )
    app = ControllerApp("flashdns-controller", flashdns_app.setup, env_prefix="FLASHDNS_")
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(settings, stop))
    try:
        serving = "flashdns" not in args  # the embedded backend writes the port file once it answers
        for _ in range(500):
            if port_file.exists() or task.done() or (not serving and _synced(app)):
                break
            await asyncio.sleep(0.02)
        if task.done():
            raise RuntimeError(f"flashdns-controller exited: {task.result()}")
        yield Running(app, json.loads(port_file.read_text())["dns"] if port_file.exists() else 0)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def _synced(app: ControllerApp) -> bool:
    return app.context is not None and all(i.has_synced for i in app.context.informers)


def service(name: str, ns: str = "default", **spec: Any) -> KubeObject:
    spec.setdefault("ports", [{"name": "http", "port": 80, "protocol": "TCP"}])
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def endpoint_slice(
    service_name: str, ips: list[str], ns: str = "default", suffix: str = "a", **ep: Any
) -> KubeObject:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-{suffix}",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, **ep} for ip in ips],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def pod(name: str, ip: str, ns: str = "default") -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]},
    }


async def create_pod(client: KubeClient, name: str, ip: str, ns: str = "default") -> KubeObject:
    """Create, then set the status as kubelet does (status is a subresource)."""
    created = await client.create(PODS, pod(name, ip, ns))
    return await client.replace(
        PODS, {**created, "status": pod(name, ip, ns)["status"]}, subresource="status"
    )
