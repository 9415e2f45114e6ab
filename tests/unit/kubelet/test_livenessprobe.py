"""The liveness-probe sidecar's stand-in (nodeenv/kubelet/livenessprobe.py) answered as kubelet asks
it: GET /healthz over HTTP, the driver's Identity.Probe behind it on a real unix socket."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import wrappers_pb2

from nodeenv.kubelet.livenessprobe import stand_in
from nodeenv.kubelet.sidecars.launch import node_path
from nodeenv.kubelet.volumes import Mount
from protos import csi_pb2, csi_pb2_grpc


class Identity(csi_pb2_grpc.IdentityServicer):  # type: ignore[misc]
    ready = True

    def Probe(self, request: Any, context: Any) -> csi_pb2.ProbeResponse:
        return csi_pb2.ProbeResponse(ready=wrappers_pb2.BoolValue(value=self.ready))


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[tuple[Identity, grpc.Server, Path]]:
    identity, server = Identity(), grpc.server(ThreadPoolExecutor(2))
    csi_pb2_grpc.add_IdentityServicer_to_server(identity, server)
    (tmp_path / "socket-dir").mkdir()
    server.add_insecure_port(f"unix://{tmp_path / 'socket-dir' / 'csi.sock'}")
    server.start()
    yield identity, server, tmp_path
    server.stop(None)


def _get(port: int) -> tuple[int, str]:
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_healthz_follows_the_drivers_probe(driver: tuple[Identity, grpc.Server, Path]) -> None:
    identity, server, root = driver
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--csi-address=/csi/csi.sock", f"--http-endpoint=127.0.0.1:{port}", "--v=5"]
    sidecar = {
        "name": "liveness-probe",
        "image": "registry.k8s.io/sig-storage/livenessprobe:v2.15.0",
        "args": args,
    }
    proc = stand_in(sidecar, [Mount(root / "socket-dir", "/csi", False)], netns=None)
    try:
        assert _get(port) == (200, "ok")
        identity.ready = False
        assert _get(port) == (500, "driver responded but is not ready")
        server.stop(None)
        status, body = _get(port)
        assert status == 500 and "UNAVAILABLE" in body, body
    finally:
        proc.terminate()
        proc.wait(10)


def test_socket_path_maps_through_the_longest_mount(tmp_path: Path) -> None:
    mounts = [Mount(tmp_path / "kubelet", "/var/lib/kubelet", False),
              Mount(tmp_path / "plugin", "/var/lib/kubelet/plugins/x", False)]  # fmt: skip
    assert node_path(mounts, "unix:///var/lib/kubelet/plugins/x/csi.sock") == tmp_path / "plugin" / "csi.sock"
    assert node_path(mounts, "/var/lib/kubelet/pods") == tmp_path / "kubelet" / "pods"
    with pytest.raises(ValueError, match="on no volume"):
        node_path(mounts, "/csi/csi.sock")
