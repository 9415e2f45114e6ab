"""`lightningstor-csi`: the LightningStor CSI driver stor.plasmacloud.io."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from prometheus_client import CollectorRegistry, start_http_server

from common.jsonlog import setup_logging
from csi import iothrottle, loopdev
from csi.backends.base import VolumeBackend
from csi.server import build_server
from csi.settings import DRIVER_NAME, VENDOR_VERSION, CsiSettings, split_host_port

log = logging.getLogger("csi.main")

GRACE_SECONDS = 10.0


def make_backend(settings: CsiSettings) -> VolumeBackend:
    if settings.backend == "lightningstor":
        from csi.backends.lightningstor import LightningStorBackend

        assert settings.plasmacloud is not None  # validate() saw to it
        return LightningStorBackend(
            settings.lightningstor_endpoint, settings.plasmacloud, timeout=settings.lightningstor_timeout
        )
    from csi.backends.local import LocalBackend

    throttle = iothrottle.detect(settings.qos_cgroup)
    if throttle is None:
        log.warning("no cgroup I/O throttling on this node: volumes can only have qosClass=unlimited")
    return LocalBackend(
        settings.state_dir,
        settings.node_id,
        capacity_bytes=settings.capacity_bytes,
        max_volumes_per_node=settings.resolved_max_volumes(loopdev.node_capacity()),
        writer=settings.serves_controller,
        throttle=throttle,
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = CsiSettings.from_args(sys.argv[1:] if argv is None else argv, os.environ)
    except ValueError as e:
        print(f"lightningstor-csi: {e}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s; stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        backend = make_backend(settings)
    except ValueError as e:  # --qos-cgroup naming a directory without throttle files
        print(f"lightningstor-csi: {e}", file=sys.stderr)
        return 2
    registry = CollectorRegistry()
    server, health = build_server(settings, backend, registry)
    if settings.metrics_address:
        host, port = split_host_port(settings.metrics_address)
        start_http_server(port, addr=host, registry=registry)
    server.start()
    log.info(
        "%s %s serving %s on %s (backend %s, node %s)",
        DRIVER_NAME,
        VENDOR_VERSION,
        settings.mode,
        settings.endpoint,
        backend.name,
        settings.node_id,
        extra={"metrics": settings.metrics_address or "off"},
    )
    stop.wait()
    health.enter_graceful_shutdown()
    server.stop(GRACE_SECONDS).wait()
    backend.close()
    settings.socket_path.unlink(missing_ok=True)
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
