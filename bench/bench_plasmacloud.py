"""PlasmaCloud gRPC figures: what TLS and an IAM token per call cost the CSI and LB paths.

Same run, same in-process service doubles, two ways in:
  plaintext: the doubles on an insecure port, the clients' stubs on an insecure channel (what the
             clients did before common/plasmacloud_grpc.py);
  tls+token: the doubles' TLS port with the IAM token check, the clients as they are now.
1. LightningStor: LightningStorBackend create_volume + delete_volume (the CSI CreateVolume and
   DeleteVolume paths' calls: ListVolumes, CreateVolume, DeleteVolume), 300 cycles: p50/p95/p99.
2. FiberLB: GrpcBackend.apply of a new Service (CreateLoadBalancer, 2 pools and listeners), 100
   Services; then an endpoint change of each (GetLoadBalancer, GetPool, UpdatePool): p50/p95/p99.
3. One unary call (ListVolumes, one item): p50/p95/p99 of 1,000, the floor of both.
4. The CSI driver process (`--backend lightningstor`) against the TLS double: CreateVolume +
   DeleteVolume through csi.sock, 200 cycles (on a checkout without TLS, the same over plaintext).

    make bench BENCH=plasmacloud
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from bench.stats import pct
from controllers.fiberlb.annotations import LbOptions
from controllers.fiberlb.desired import Backend, DesiredLB, Listener
from controllers.fiberlb.grpc_backend import GrpcBackend
from csi.backends.base import VolumeSpec
from csi.backends.lightningstor import LightningStorBackend
from nodeenv import lightningstor as ls_double
from protos import csi_pb2, csi_pb2_grpc, fiberlb_pb2_grpc
from protos import lightningstor_pb2 as ls
from protos import lightningstor_pb2_grpc as ls_grpc
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeFiberLB

try:
    from nodeenv.plasmacloud_auth import ensure_dev_pki

    TLS = True
except ImportError:  # a checkout from before TLS: the plaintext figures only
    TLS = False

REPO = Path(__file__).resolve().parent.parent
GIB = 1 << 30


def line(name: str, samples: list[float]) -> str:
    return (f"  {name:<44} p50 {pct(samples, 50) * 1000:7.3f} ms  p95 {pct(samples, 95) * 1000:7.3f} ms  "
            f"p99 {pct(samples, 99) * 1000:7.3f} ms  (n={len(samples)})")  # fmt: skip


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Doubles:
    """The LightningStor and FiberLB doubles, each on a plaintext port and (with TLS) a TLS port."""

    def __init__(self, root: Path) -> None:
        self.ls = ls_double.FakeVolumeService(root=root / "ls", nodes=["bench"])
        (root / "ls").mkdir()
        self.lb = FakeFiberLB()
        self.servers: list[grpc.Server] = []
        self.plain = self._serve(grpc.server(futures.ThreadPoolExecutor(8)), None)
        self.pki: Any = ensure_dev_pki(root / "pki") if TLS else None
        self.tls = self._serve(self.pki.server(8)[0], self.pki) if TLS else ""

    def _serve(self, server: grpc.Server, pki: Any) -> str:
        ls_grpc.add_VolumeServiceServicer_to_server(self.ls, server)
        fiberlb_pb2_grpc.add_LoadBalancerServiceServicer_to_server(self.lb, server)
        port = pki.add_port(server, "127.0.0.1:0") if pki else server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.servers.append(server)
        return f"127.0.0.1:{port}"

    def clients(self, mode: str) -> tuple[LightningStorBackend, GrpcBackend]:
        if mode == "tls+token":
            auth = self.pki.client_auth()
            return LightningStorBackend(self.tls, auth), GrpcBackend(self.tls, auth)
        if not TLS:
            return LightningStorBackend(self.plain), GrpcBackend(self.plain)  # type: ignore[call-arg]
        store, lb = (
            LightningStorBackend(self.tls, self.pki.client_auth()),
            GrpcBackend(self.tls, self.pki.client_auth()),
        )
        for client in (store, lb):  # the stubs on a plaintext channel: the clients before TLS
            client._channel.close()
            client._channel = grpc.insecure_channel(self.plain)
        store._stub = ls_grpc.VolumeServiceStub(store._channel)
        lb._stub = fiberlb_pb2_grpc.LoadBalancerServiceStub(lb._channel)
        return store, lb

    def stop(self) -> None:
        for s in self.servers:
            s.stop(None)


def desired(i: int, port: int = 8080) -> DesiredLB:
    members = (Backend(f"10.0.{i // 200}.{i % 200 + 1}", port), Backend("10.9.0.1", port))
    return DesiredLB(
        service=f"bench/svc{i}", uid=f"u{i}", namespace="bench", vips=(f"192.168.{i // 200}.{i % 200 + 1}",),
        options=LbOptions(), listeners=(Listener(name="http", protocol="TCP", port=80, backends=members),
                                        Listener(name="dns", protocol="UDP", port=53, backends=members)),
    )  # fmt: skip


def backend_figures(d: Doubles, mode: str) -> None:
    store, lb = d.clients(mode)
    print(f"{mode}:")
    create = []
    for i in range(300):
        spec = VolumeSpec(name=f"{mode}-v{i}", size_bytes=GIB, access_type="mount", fs_type="ext4")
        create.append(timed(lambda s=spec: store.delete_volume(store.create_volume(s).id)))  # type: ignore[misc]
    print(line("LightningStor create+delete volume", create))
    applies = [timed(lambda i=i: lb.apply(desired(i))) for i in range(100)]  # type: ignore[misc]
    print(line("FiberLB apply, new Service", applies))
    updates = [timed(lambda i=i: lb.apply(desired(i, 9090))) for i in range(100)]  # type: ignore[misc]
    print(line("FiberLB apply, endpoints changed", updates))
    for i in range(100):
        lb.delete(f"bench/svc{i}", f"u{i}")
    stub = store._stub
    calls = [
        timed(lambda: stub.ListVolumes(ls.ListVolumesRequest(page_size=1), timeout=5)) for _ in range(1000)
    ]
    print(line("one unary call (ListVolumes)", calls))
    store.close()
    lb.close()


def driver_figures(d: Doubles, root: Path) -> None:
    endpoint = f"unix://{root / 'csi.sock'}"
    target = d.tls or d.plain
    argv = [sys.executable, "-m", "csi.main", "--endpoint", endpoint, "--node-id", "bench", "--backend",
            "lightningstor", "--lightningstor-endpoint", target, "--log-level", "warning"]  # fmt: skip
    if TLS:
        argv += d.pki.client_flags()
    proc = subprocess.Popen(argv, cwd=REPO, stderr=(root / "driver.log").open("wb"))
    channel = grpc.insecure_channel(endpoint)  # kubelet's side: a root-only unix socket
    c, ident = csi_pb2_grpc.ControllerStub(channel), csi_pb2_grpc.IdentityStub(channel)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if ident.Probe(csi_pb2.ProbeRequest(), timeout=1).ready.value:
                    break
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        cap = csi_pb2.VolumeCapability(access_mode=csi_pb2.VolumeCapability.AccessMode(mode=1))
        cap.mount.SetInParent()

        def cycle(i: int) -> None:
            size = csi_pb2.CapacityRange(required_bytes=GIB)
            req = csi_pb2.CreateVolumeRequest(name=f"pvc-{i}", volume_capabilities=[cap], capacity_range=size)
            vid = c.CreateVolume(req).volume.volume_id
            c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vid))

        samples = [timed(lambda i=i: cycle(i)) for i in range(200)]  # type: ignore[misc]
        print(f"CSI driver process, {'tls+token' if TLS else 'plaintext'} to LightningStor:")
        print(line("CreateVolume+DeleteVolume via csi.sock", samples))
    finally:
        channel.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pc-") as tmp:
        root = Path(tmp)
        d = Doubles(root)
        try:
            for mode in ("plaintext", "tls+token") if TLS else ("plaintext",):
                backend_figures(d, mode)
            driver_figures(d, root)
        finally:
            d.stop()
    if not TLS:
        print("(this checkout has no PlasmaCloud TLS: plaintext figures only)")


if __name__ == "__main__":
    main()
