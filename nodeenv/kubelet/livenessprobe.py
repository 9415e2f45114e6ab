"""The CSI `livenessprobe` sidecar's job, for the pods that name its image (not built here, see
notbooted.py): the overlay's `lightningstor-csi` containers point their liveness and readiness probes
at the sidecar's `/healthz` (port `healthz`, 9808), as every CSI driver using the sidecar does, so
without it they could never pass. The runner serves that endpoint in the sidecar's place, where the
sidecar would serve it: in the pod's network namespace (the node's for a host-network pod), on the
sidecar's `--http-endpoint`, calling the driver's Identity.Probe on the sidecar's `--csi-address`
(mapped through the sidecar's own volume mounts to the node's path) with `--probe-timeout`, and
answering as the sidecar answers: 200 `ok` when the driver is ready, 500 with the reason otherwise.
The kubelet probes of the driver container are then real: HTTP to the pod's IP, a CSI Probe on the
driver's socket, the driver's backend check behind it.

python -m nodeenv.kubelet.livenessprobe --csi-address=/host/path/csi.sock --http-endpoint=:9808
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc

from nodeenv.kubelet.sidecars import launch
from nodeenv.kubelet.volumes import Mount
from protos import csi_pb2, csi_pb2_grpc

IMAGE = "registry.k8s.io/sig-storage/livenessprobe"


def probe(csi_address: str, timeout: float) -> tuple[bool, str]:
    """The sidecar's check: Identity.Probe; ready unless the driver says `ready: false`."""
    target = csi_address if csi_address.startswith("unix:") else f"unix://{csi_address}"
    with grpc.insecure_channel(target) as channel:
        try:
            reply = csi_pb2_grpc.IdentityStub(channel).Probe(csi_pb2.ProbeRequest(), timeout=timeout)
        except grpc.RpcError as e:
            return False, f"rpc error: code = {e.code().name} desc = {e.details()}"
    if reply.HasField("ready") and not reply.ready.value:
        return False, "driver responded but is not ready"
    return True, "ok"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livenessprobe", description=__doc__.split("\n\n")[0])
    p.add_argument("--csi-address", default="/run/csi/socket")
    p.add_argument("--http-endpoint", default="")
    p.add_argument("--health-port", default="9808", help="used when --http-endpoint is empty")
    p.add_argument("--probe-timeout", default="1s")
    return p


def _seconds(value: str) -> float:
    return float(value.removesuffix("ms")) / 1000 if value.endswith("ms") else float(value.removesuffix("s"))


def main(argv: Sequence[str] | None = None) -> int:
    args, _ = _parser().parse_known_args(argv)  # the sidecar's other flags (-v, ...) change nothing here
    host, _, port = (args.http_endpoint or f":{args.health_port}").rpartition(":")
    timeout = _seconds(args.probe_timeout)

    class Healthz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/healthz":
                self.send_error(404)
                return
            ok, text = probe(args.csi_address, timeout)
            body = text.encode()
            self.send_response(200 if ok else 500)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: Any) -> None:
            pass

    ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Healthz).serve_forever()
    return 0


def stand_in(container: dict[str, Any], mounts: list[Mount], netns: str | None) -> subprocess.Popen[bytes]:
    """Start serving the sidecar container's endpoint (in `netns`, a named netns, or the node's)."""
    return launch.start(__name__, container, mounts, netns)


if __name__ == "__main__":
    sys.exit(main())
