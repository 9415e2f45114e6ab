"""Container probes run the way kubelet's prober runs them (pkg/kubelet/prober): httpGet (2xx/3xx
succeed; HTTPS without verification; `host` defaulting to the pod IP; a named port looked up among
the container's ports), tcpSocket (a connect), exec (the command in the container via `podman
exec`, exit 0), grpc (grpc.health.v1 Check, SERVING). Each attempt returns (ok, the reason
kubelet would put in its Unhealthy event); `ProbeTracker` applies initialDelaySeconds,
periodSeconds and the success/failure thresholds."""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

Obj = dict[str, Any]
Exec = Callable[[list[str], float], tuple[int, str]]
"""(command, timeout) -> (exit code, output), in the container."""
KINDS = ("startupProbe", "livenessProbe", "readinessProbe")
_SERVING = health_pb2.HealthCheckResponse.ServingStatus
LABEL = {"startupProbe": "Startup", "livenessProbe": "Liveness", "readinessProbe": "Readiness"}


def resolve_port(container: Obj, port: int | str) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"port {port!r} is not a named port of the container")


def _http(probe: Obj, container: Obj, pod_ip: str, timeout: float) -> tuple[bool, str]:
    get = probe["httpGet"]
    host, port = get.get("host") or pod_ip, resolve_port(container, get["port"])
    cls = http.client.HTTPSConnection if get.get("scheme", "HTTP") == "HTTPS" else http.client.HTTPConnection
    kw: dict[str, Any] = (
        {"context": ssl._create_unverified_context()} if cls is http.client.HTTPSConnection else {}
    )
    conn = cls(host, port, timeout=timeout, **kw)
    try:
        headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
        conn.request("GET", get.get("path", "/"), headers={"User-Agent": "kube-probe/1.32", **headers})
        resp = conn.getresponse()
        body = resp.read(1024).decode(errors="replace")
    except OSError as e:
        return False, f'Get "http://{host}:{port}{get.get("path", "/")}": {e}'
    finally:
        conn.close()
    if 200 <= resp.status < 400:
        return True, ""
    return False, f"HTTP probe failed with statuscode: {resp.status} {body[:200]}".strip()


def _tcp(probe: Obj, container: Obj, pod_ip: str, timeout: float) -> tuple[bool, str]:
    t = probe["tcpSocket"]
    host, port = t.get("host") or pod_ip, resolve_port(container, t["port"])
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        return False, f"dial tcp {host}:{port}: {e}"
    return True, ""


def _grpc(probe: Obj, pod_ip: str, timeout: float) -> tuple[bool, str]:
    g = probe["grpc"]
    target = f"{pod_ip}:{g['port']}"
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=g.get("service", "")), timeout=timeout)
        except grpc.RpcError as e:
            return False, f"failed to connect service {target!r} within {timeout}s: {e.code().name}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        return (
            False,
            f"service unhealthy (responded with {_SERVING.Name(reply.status)})",
        )
    return True, ""


def run_probe(probe: Obj, container: Obj, pod_ip: str, in_container: Exec) -> tuple[bool, str]:
    timeout = float(probe.get("timeoutSeconds", 1))
    if "httpGet" in probe:
        return _http(probe, container, pod_ip, timeout)
    if "tcpSocket" in probe:
        return _tcp(probe, container, pod_ip, timeout)
    if "grpc" in probe:
        return _grpc(probe, pod_ip, timeout)
    if "exec" in probe:
        try:
            code, out = in_container(list(probe["exec"]["command"]), timeout)
        except subprocess.TimeoutExpired:
            return False, f"command timed out after {timeout:g}s"
        return code == 0, "" if code == 0 else f"exit code {code}: {out.strip()[:300]}"
    return False, f"probe has no handler: {sorted(probe)}"


@dataclass
class ProbeTracker:
    kind: str
    probe: Obj
    started: float
    successes: int = 0
    failures: int = 0
    last: float = 0.0
    result: bool | None = None
    reason: str = field(default="")

    def due(self, now: float) -> bool:
        if now < self.started + float(self.probe.get("initialDelaySeconds", 0)):
            return False
        return now >= self.last + float(self.probe.get("periodSeconds", 10))

    def record(self, now: float, ok: bool, reason: str) -> bool | None:
        """Count one attempt; the new result when a threshold is crossed, else None."""
        self.last = now
        self.reason = reason
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.result is not True and self.successes >= int(self.probe.get("successThreshold", 1)):
                self.result = True
                return True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if self.result is not False and self.failures >= int(self.probe.get("failureThreshold", 3)):
                self.result = False
                return False
        return None
