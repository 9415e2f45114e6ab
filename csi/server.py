"""The gRPC server: servicers for the mode, health service, metrics interceptor, unix socket."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry, Counter, Histogram

from csi import loopdev
from csi.backends.base import VolumeBackend
from csi.controller import ControllerServicer
from csi.group_controller import GroupControllerServicer
from csi.identity import IdentityServicer
from csi.locks import KeyedLocks
from csi.mounts import can_grow_ext4_online
from csi.node import NodeServicer
from csi.node_paths import KubeletPaths
from csi.settings import CsiSettings
from protos import csi_pb2_grpc

log = logging.getLogger(__name__)


class RpcMetrics(grpc.ServerInterceptor):
    """Counts and times every unary RPC by method and final status code."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter("csi_rpc_total", "CSI RPCs handled", ["method", "code"], registry=registry)
        self.latency = Histogram(
            "csi_rpc_duration_seconds",
            "CSI RPC latency",
            ["method"],
            registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        behavior = handler.unary_unary

        def observed(request: Any, context: grpc.ServicerContext) -> Any:
            t0 = time.perf_counter()
            code = "UNKNOWN"
            try:
                response = behavior(request, context)
                code = _code_name(context, "OK")
                return response
            except BaseException:
                code = _code_name(context, "UNKNOWN")
                raise
            finally:
                self.calls.labels(method, code).inc()
                self.latency.labels(method).observe(time.perf_counter() - t0)

        return grpc.unary_unary_rpc_method_handler(
            observed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _code_name(context: grpc.ServicerContext, default: str) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else default


def prepare_socket(path: Path) -> None:
    """Create the socket's directory and remove a stale socket left by a previous run."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()
        else:
            raise FileExistsError(f"{path} exists and is not a socket")
    except FileNotFoundError:
        pass


def build_server(
    settings: CsiSettings, backend: VolumeBackend, registry: CollectorRegistry
) -> tuple[grpc.Server, health.HealthServicer]:
    server = grpc.server(
        ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="csi-rpc"),
        interceptors=[RpcMetrics(registry)],
        maximum_concurrent_rpcs=settings.workers * 8,
    )
    locks = KeyedLocks()
    default_fs = settings.resolved_fs_type(can_grow_ext4_online())
    small_fs = "ext4" if settings.default_fs_type == "auto" and default_fs == "xfs" else ""
    log.info("volumes that name no fs_type get %s", default_fs, extra={"default_fs_type": default_fs})
    services = ["csi.v1.Identity"]
    groups = settings.serves_controller and backend.supports_group_snapshots
    csi_pb2_grpc.add_IdentityServicer_to_server(IdentityServicer(backend, group_controller=groups), server)
    if settings.serves_controller:
        controller = ControllerServicer(backend, locks, default_fs, small_fs)
        csi_pb2_grpc.add_ControllerServicer_to_server(controller, server)
        services.append("csi.v1.Controller")
        if backend.supports_group_snapshots:
            csi_pb2_grpc.add_GroupControllerServicer_to_server(
                GroupControllerServicer(backend, locks), server
            )
            services.append("csi.v1.GroupController")
    if settings.serves_node:
        max_volumes = settings.resolved_max_volumes(loopdev.node_capacity())
        paths = KubeletPaths.of(settings.kubelet_dirs)
        node = NodeServicer(backend, locks, settings.node_id, max_volumes, default_fs, paths)
        csi_pb2_grpc.add_NodeServicer_to_server(node, server)
        services.append("csi.v1.Node")
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ["", *services]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    prepare_socket(settings.socket_path)
    server.add_insecure_port(settings.endpoint)
    return server, health_servicer
