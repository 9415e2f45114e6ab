"""What every CSI sidecar stand-in shares, as the sidecars share it through csi-lib-utils and
client-go:

- the sidecars' common flags (`--csi-address`, `--timeout`, `--leader-election`,
  `--leader-election-namespace`, `--http-endpoint`; others such as `-v` or `--feature-gates` are
  accepted and read by the stand-in that uses them), plus what launch.py adds for a stand-in: the
  node path of the container's service-account mount and the pod's name (the sidecar's hostname);
- in-cluster API config: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the token and
  CA of the service-account mount (the token read again at each sync: kubelet rotates it);
- the driver's name from Identity.GetPluginInfo, retried until the driver answers (the sidecars
  wait for their driver the same way);
- leader election on a coordination.k8s.io Lease (client-go's: 15 s lease, 10 s renew deadline,
  5 s retry; a leader that cannot renew exits, and kubelet restarts it);
- /healthz (and /healthz/leader-election) on `--http-endpoint` when it is given;
- the loop: the stand-in's `sync()` every second while leading; an object whose work failed is
  retried with exponential back-off from 1 s to 5 min (`--retry-interval-start/max`).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import grpc

from common.jsonlog import setup_logging
from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.sidecars.events import EventRecorder
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)
Obj = dict[str, Any]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def seconds(value: str) -> float:
    """A Go duration as the sidecars' flags take it: 60s, 1m, 500ms, 1m30s."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"([0-9.]+)(ms|s|m|h)", value)
    if not parts or "".join(a + b for a, b in parts) != value:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}")
    return sum(float(n) * units[u] for n, u in parts)


def parser(prog: str, doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--csi-address", default="/run/csi/socket", help="the driver's socket")
    p.add_argument("--timeout", type=seconds, default=seconds("15s"), help="timeout of each CSI call")
    p.add_argument("--leader-election", action="store_true", help="act only while holding the Lease")
    p.add_argument("--leader-election-namespace", default="", help="the Lease's namespace (the pod's)")
    p.add_argument("--leader-election-lease-duration", type=seconds, default=15.0)
    p.add_argument("--leader-election-renew-deadline", type=seconds, default=10.0)
    p.add_argument("--leader-election-retry-period", type=seconds, default=5.0)
    p.add_argument("--http-endpoint", default="", help="serve /healthz here (host:port)")
    p.add_argument("--retry-interval-start", type=seconds, default=1.0)
    p.add_argument("--retry-interval-max", type=seconds, default=300.0)
    p.add_argument("--feature-gates", default="")
    p.add_argument(
        "--serviceaccount-dir",
        type=Path,
        default=Path(SA_DIR),
        help="stand-in: the node path of the container's service-account mount",
    )
    p.add_argument("--pod-name", default=os.uname().nodename, help="stand-in: the sidecar's hostname")
    p.add_argument("--period", type=float, default=1.0, help="stand-in: seconds between syncs")
    return p


def feature_gates(value: str) -> dict[str, bool]:
    out = {}
    for item in filter(None, value.split(",")):
        name, _, on = item.partition("=")
        out[name.strip()] = on.strip().lower() == "true"
    return out


def incluster_client(sa_dir: Path) -> KubeClient:
    """rest.InClusterConfig(): the Service variables kubelet sets, the mounted token and CA."""
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
    host = f"[{host}]" if ":" in host else host
    return KubeClient(f"https://{host}:{port}", (sa_dir / "token").read_text().strip(), sa_dir / "ca.crt")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rpc_error(e: grpc.RpcError) -> str:
    """How a gRPC error reads in the sidecars' events: `rpc error: code = X desc = ...`."""
    code = e.code()
    name = "".join(w.capitalize() for w in code.name.split("_")) if code else "Unknown"
    return f"rpc error: code = {name} desc = {e.details()}"


def wait_for_driver(channel: grpc.Channel, address: str, stop: threading.Event) -> str | None:
    """The driver's name once it answers GetPluginInfo (None if stopped first)."""
    while not stop.is_set():
        try:
            info = csi_pb2_grpc.IdentityStub(channel).GetPluginInfo(csi_pb2.GetPluginInfoRequest(), timeout=5)
            return str(info.name)
        except grpc.RpcError as e:
            log.info("still connecting to %s: %s", address, rpc_error(e))
            stop.wait(1)
    return None


MERGE = "application/merge-patch+json"


def add_finalizer(client: KubeClient, path: str, obj: Obj, name: str) -> None:
    have = obj["metadata"].get("finalizers") or []
    if name not in have:
        meta = {"finalizers": [*have, name], "resourceVersion": obj["metadata"]["resourceVersion"]}
        client.request("PATCH", path, {"metadata": meta}, MERGE)


def remove_finalizer(client: KubeClient, path: str, obj: Obj, name: str) -> None:
    """`name` out of the object's finalizers (an object already gone is fine)."""
    have = obj["metadata"].get("finalizers") or []
    if name in have:
        rest = [f for f in have if f != name]
        meta = {"finalizers": rest or None, "resourceVersion": obj["metadata"]["resourceVersion"]}
        try:
            client.request("PATCH", path, {"metadata": meta}, MERGE)
        except ApiError as e:
            if e.code != 404:
                raise


class Backoff:
    """Per-object exponential back-off of failed work (the workqueue's rate limiter)."""

    def __init__(self, start: float, cap: float) -> None:
        self.start, self.cap = start, cap
        self._next: dict[str, tuple[float, float]] = {}

    def due(self, key: str) -> bool:
        return time.monotonic() >= self._next.get(key, (0.0, 0.0))[0]

    def failed(self, key: str) -> None:
        delay = min(self._next.get(key, (0.0, self.start / 2))[1] * 2, self.cap)
        self._next[key] = (time.monotonic() + delay, delay)

    def done(self, key: str) -> None:
        self._next.pop(key, None)


@dataclass
class Context:
    """What a stand-in's sync gets: its flags, the API (as the pod's service account), the driver."""

    args: argparse.Namespace
    channel: grpc.Channel
    driver: str
    events: EventRecorder
    backoff: Backoff
    client: KubeClient = field(init=False)

    def __post_init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        self.client = incluster_client(self.args.serviceaccount_dir)

    @property
    def timeout(self) -> float:
        return float(self.args.timeout)


class Reconciler(Protocol):
    def sync(self) -> None: ...


def sanitize(name: str) -> str:
    """csi-lib-utils' Lease name: anything but [a-zA-Z0-9-] becomes `-`."""
    name = re.sub(r"[^a-zA-Z0-9-]", "-", name)
    return name + "X" if name.endswith("-") else name


def serve_health(endpoint: str, healthy: Callable[[], bool]) -> None:
    host, _, port = endpoint.rpartition(":")

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.split("?")[0] in ("/healthz", "/healthz/leader-election") and healthy()
            body = b"ok" if ok else b"not ok"
            self.send_response(200 if ok else 500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: Any) -> None:
            pass

    server = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main(
    prog: str,
    doc: str,
    lease: Callable[[str], str],
    make: Callable[[Context], Reconciler],
    argv: Sequence[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], None] = lambda p: None,
) -> int:
    """Run a controller sidecar stand-in until SIGTERM; `lease(driver)` names its Lease."""
    from nodeenv.kubelet.sidecars.leader import LeaderElector

    p = parser(prog, doc)
    extra(p)
    args, _ = p.parse_known_args(argv)
    setup_logging(os.environ.get("STANDIN_LOG_LEVEL", "info"))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    address = args.csi_address.removeprefix("unix://")
    channel = grpc.insecure_channel(f"unix://{address}")
    driver = wait_for_driver(channel, address, stop)
    if driver is None:
        return 0
    sa_ns = (args.serviceaccount_dir / "namespace").read_text().strip()
    events = EventRecorder(
        lambda: incluster_client(args.serviceaccount_dir), f"{prog}-{driver}", args.pod_name
    )
    ctx = Context(args, channel, driver, events, Backoff(args.retry_interval_start, args.retry_interval_max))
    reconciler = make(ctx)
    elector = None
    if args.leader_election:
        elector = LeaderElector(
            lambda: ctx.client,
            args.leader_election_namespace or sa_ns,
            sanitize(lease(driver)),
            args.pod_name,
            args.leader_election_lease_duration,
            args.leader_election_renew_deadline,
        )
    if args.http_endpoint:
        serve_health(args.http_endpoint, lambda: not stop.is_set())
    log.info("%s stand-in for %s on %s", prog, driver, address)
    next_election = 0.0
    while not stop.is_set():
        try:
            ctx.refresh()
            if elector is not None and time.monotonic() >= next_election:
                next_election = time.monotonic() + args.leader_election_retry_period
                if not elector.try_acquire_or_renew():
                    if elector.lost():
                        log.error("leaderelection lost")
                        return 1
                    stop.wait(args.period)
                    continue
            if elector is None or elector.leading:
                reconciler.sync()
        except (ApiError, OSError) as e:
            log.warning("sync failed: %s", e)
        stop.wait(args.period)
    if elector is not None:
        elector.release()
    channel.close()
    return 0


def run_module(
    prog: str, doc: str, lease: Callable[[str], str], make: Callable[[Context], Reconciler]
) -> None:
    sys.exit(main(prog, doc, lease, make))
