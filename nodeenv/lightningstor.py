"""A faithful LightningStor VolumeService (PlasmaCloud's block storage, which the CSI driver's
`lightningstor` backend calls) on a real gRPC socket: in-process for the tests (`serve`), or as the
daemon `make boot` runs for the booted CSI pods and `make sandbox` for its cluster's nodes (`python -m
nodeenv.lightningstor`, see --help).

Volumes are sparse files under a directory; AttachVolume attaches a loop device and
hands its path back in `device_path`, as the real service hands back an NBD/iSCSI
device. Names are idempotency keys, missing things answer NOT_FOUND, deletes of
missing things succeed, a volume attached read-write to one node cannot be attached to another
(FAILED_PRECONDITION naming the node; read-only beside read-only can), ExpandVolume resizes the
attached device itself, ModifyVolume replaces the volume's QoS policy (negative limits are
INVALID_ARGUMENT), and list page tokens are the last id returned (a cursor), so listings survive
changes between pages. Like the real service it speaks TLS only and refuses a call without a valid
IAM token with UNAUTHENTICATED (nodeenv/plasmacloud_auth.py).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import timestamp_pb2

from nodeenv.plasmacloud_auth import DevPki, ensure_dev_pki
from protos import lightningstor_pb2 as ls
from protos import lightningstor_pb2_grpc as ls_grpc


def _now() -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.GetCurrentTime()
    return ts


@dataclass
class FakeVolumeService(ls_grpc.VolumeServiceServicer):
    root: Path
    nodes: Sequence[str]
    volumes: dict[str, ls.Volume] = field(default_factory=dict)
    snapshots: dict[str, ls.Snapshot] = field(default_factory=dict)
    attachments: dict[tuple[str, str], ls.VolumeAttachment] = field(default_factory=dict)
    modes: dict[tuple[str, str], str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _file(self, volume_id: str) -> Path:
        return self.root / f"{volume_id}.img"

    def _get(self, volume_id: str, context: grpc.ServicerContext) -> ls.Volume:
        if volume_id not in self.volumes:
            context.abort(grpc.StatusCode.NOT_FOUND, f"volume {volume_id} not found")
        return self.volumes[volume_id]

    def CreateVolume(self, request: ls.CreateVolumeRequest, context: grpc.ServicerContext) -> ls.Volume:
        self.calls.append("CreateVolume")
        with self.lock:
            for vol in self.volumes.values():
                if vol.name == request.name:
                    if vol.size_bytes != request.size_bytes:
                        context.abort(
                            grpc.StatusCode.ALREADY_EXISTS, f"{request.name} exists with another size"
                        )
                    return vol
            if request.size_bytes <= 0:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "size_bytes must be positive")
            volume_id = f"ls-{uuid.uuid4().hex[:12]}"
            path = self._file(volume_id)
            if request.source_snapshot_id:
                if request.source_snapshot_id not in self.snapshots:
                    context.abort(grpc.StatusCode.NOT_FOUND, "source snapshot not found")
                src = self.root / f"{request.source_snapshot_id}.snap"
                subprocess.run(["cp", "--sparse=always", str(src), str(path)], check=True)
            elif request.source_volume_id:
                self._get(request.source_volume_id, context)
                subprocess.run(
                    ["cp", "--sparse=always", str(self._file(request.source_volume_id)), str(path)],
                    check=True,
                )
            path.touch()
            with path.open("r+b") as f:
                f.truncate(max(request.size_bytes, path.stat().st_size))
            vol = ls.Volume(
                id=volume_id,
                name=request.name,
                size_bytes=request.size_bytes,
                status="available",
                volume_type=request.volume_type,
                created_at=_now(),
                org_id=request.org_id,
                project_id=request.project_id,
                replication_factor=request.replication_factor,
                source_snapshot_id=request.source_snapshot_id,
                source_volume_id=request.source_volume_id,
                qos=request.qos,
            )
            self.volumes[volume_id] = vol
            return vol

    def DeleteVolume(self, request: ls.DeleteVolumeRequest, context: grpc.ServicerContext) -> ls.Empty:
        self.calls.append("DeleteVolume")
        with self.lock:
            if any(v == request.volume_id for v, _ in self.attachments):
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "volume is attached")
            self.volumes.pop(request.volume_id, None)
            self._file(request.volume_id).unlink(missing_ok=True)
        return ls.Empty()

    def AttachVolume(
        self, request: ls.AttachVolumeRequest, context: grpc.ServicerContext
    ) -> ls.VolumeAttachment:
        self.calls.append("AttachVolume")
        with self.lock:
            self._get(request.volume_id, context)
            if request.node_id not in self.nodes:
                context.abort(grpc.StatusCode.NOT_FOUND, f"node {request.node_id} not found")
            key = (request.volume_id, request.node_id)
            if key in self.attachments:
                if self.modes[key] != request.attach_mode:
                    context.abort(grpc.StatusCode.ALREADY_EXISTS, "attached with another mode")
                return self.attachments[key]
            elsewhere = {n: m for (v, n), m in self.modes.items() if v == request.volume_id}
            if elsewhere and (request.attach_mode != "read-only" or "read-only" not in elsewhere.values()
                              or len(set(elsewhere.values())) > 1):  # fmt: skip
                on = ", ".join(f"{n} ({m})" for n, m in sorted(elsewhere.items()))
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"volume {request.volume_id} is attached to node {on}: a volume attached read-write "
                    "is attached to one node only, read-only attachments only beside read-only ones",
                )
            device = subprocess.run(
                ["losetup", "--find", "--show", str(self._file(request.volume_id))],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            att = ls.VolumeAttachment(
                id=f"att-{uuid.uuid4().hex[:8]}",
                volume_id=request.volume_id,
                node_id=request.node_id,
                device_path=device,
                connection_info='{"transport": "loop"}',
            )
            self.attachments[key], self.modes[key] = att, request.attach_mode
            self.volumes[request.volume_id].status = "in-use"
            return att

    def DetachVolume(self, request: ls.DetachVolumeRequest, context: grpc.ServicerContext) -> ls.Empty:
        self.calls.append("DetachVolume")
        with self.lock:
            att = self.attachments.pop((request.volume_id, request.node_id), None)
            self.modes.pop((request.volume_id, request.node_id), None)
            if att is not None:
                subprocess.run(["losetup", "--detach", att.device_path], check=False)
                still = any(v == request.volume_id for v, _ in self.attachments)
                if request.volume_id in self.volumes and not still:
                    self.volumes[request.volume_id].status = "available"
        return ls.Empty()

    def GetVolume(self, request: ls.GetVolumeRequest, context: grpc.ServicerContext) -> ls.Volume:
        self.calls.append("GetVolume")
        return self._get(request.volume_id, context)

    def ListVolumes(
        self, request: ls.ListVolumesRequest, context: grpc.ServicerContext
    ) -> ls.ListVolumesResponse:
        self.calls.append("ListVolumes")
        vols = sorted(self.volumes.values(), key=lambda v: v.id)
        start, end, token = _page([v.id for v in vols], request.page_size, request.page_token)
        return ls.ListVolumesResponse(volumes=vols[start:end], next_page_token=token)

    def ExpandVolume(self, request: ls.ExpandVolumeRequest, context: grpc.ServicerContext) -> ls.Volume:
        self.calls.append("ExpandVolume")
        with self.lock:
            vol = self._get(request.volume_id, context)
            if request.new_size_bytes < vol.size_bytes:
                context.abort(grpc.StatusCode.OUT_OF_RANGE, "shrinking is refused")
            with self._file(vol.id).open("r+b") as f:
                f.truncate(request.new_size_bytes)
            vol.size_bytes = request.new_size_bytes
            for (volume_id, _), att in self.attachments.items():
                if volume_id == vol.id:
                    subprocess.run(["losetup", "--set-capacity", att.device_path], check=True)
            return vol

    def ModifyVolume(self, request: ls.ModifyVolumeRequest, context: grpc.ServicerContext) -> ls.Volume:
        self.calls.append("ModifyVolume")
        with self.lock:
            vol = self._get(request.volume_id, context)
            q = request.qos
            if min(q.read_bytes_per_second, q.write_bytes_per_second, q.read_iops, q.write_iops) < 0:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "QoS limits must not be negative")
            vol.qos.CopyFrom(q)
            return vol

    def CreateSnapshot(self, request: ls.CreateSnapshotRequest, context: grpc.ServicerContext) -> ls.Snapshot:
        self.calls.append("CreateSnapshot")
        with self.lock:
            for snap in self.snapshots.values():
                if snap.name == request.name:
                    if snap.source_volume_id != request.source_volume_id:
                        context.abort(grpc.StatusCode.ALREADY_EXISTS, "snapshot name used for another volume")
                    return snap
            vol = self._get(request.source_volume_id, context)
            snap_id = f"lss-{uuid.uuid4().hex[:12]}"
            dest = self.root / f"{snap_id}.snap"
            subprocess.run(["cp", "--sparse=always", str(self._file(vol.id)), str(dest)], check=True)
            snap = ls.Snapshot(
                id=snap_id, name=request.name, source_volume_id=vol.id, size_bytes=vol.size_bytes,
                created_at=_now(), ready=True,
            )  # fmt: skip
            self.snapshots[snap_id] = snap
            return snap

    def DeleteSnapshot(self, request: ls.DeleteSnapshotRequest, context: grpc.ServicerContext) -> ls.Empty:
        self.calls.append("DeleteSnapshot")
        self.snapshots.pop(request.snapshot_id, None)
        (self.root / f"{request.snapshot_id}.snap").unlink(missing_ok=True)
        return ls.Empty()

    def GetSnapshot(self, request: ls.GetSnapshotRequest, context: grpc.ServicerContext) -> ls.Snapshot:
        self.calls.append("GetSnapshot")
        if request.snapshot_id not in self.snapshots:
            context.abort(grpc.StatusCode.NOT_FOUND, "snapshot not found")
        return self.snapshots[request.snapshot_id]

    def ListSnapshots(
        self, request: ls.ListSnapshotsRequest, context: grpc.ServicerContext
    ) -> ls.ListSnapshotsResponse:
        snaps = sorted(self.snapshots.values(), key=lambda s: s.id)
        if request.source_volume_id:
            snaps = [s for s in snaps if s.source_volume_id == request.source_volume_id]
        start, end, token = _page([s.id for s in snaps], request.page_size, request.page_token)
        return ls.ListSnapshotsResponse(snapshots=snaps[start:end], next_page_token=token)


def _page(ids: list[str], size: int, token: str) -> tuple[int, int, str]:
    """[start, end) of sorted `ids` after the cursor `token` (the last id of the previous page)."""
    start = bisect.bisect_right(ids, token) if token else 0
    end = len(ids) if size <= 0 else min(len(ids), start + size)
    return start, end, ids[end - 1] if end < len(ids) else ""


def serve(
    root: Path, nodes: Sequence[str], pki: DevPki, host: str = ""
) -> tuple[grpc.Server, FakeVolumeService, str]:
    """Start the fake on `root/ls.sock`, or on TCP `host`:<free port> (the `host:port` a cluster's
    LIGHTNINGSTOR_ENDPOINT names), TLS with `pki`'s serving certificate and its IAM key checking
    every call's token; returns (server, servicer, endpoint)."""
    root.mkdir(parents=True, exist_ok=True)
    service = FakeVolumeService(root=root, nodes=nodes)
    server, _ = pki.server(workers=8)
    ls_grpc.add_VolumeServiceServicer_to_server(service, server)
    if host:
        endpoint = f"{host}:{pki.add_port(server, f'{host}:0')}"
    else:
        endpoint = f"unix://{root / 'ls.sock'}"
        pki.add_port(server, endpoint)
    server.start()
    time.sleep(0)
    return server, service, endpoint


def detach_all(service: FakeVolumeService) -> None:
    """Release every loop device the service attached (the daemon's clean stop)."""
    with service.lock:
        for att in service.attachments.values():
            subprocess.run(["losetup", "--detach", att.device_path], check=False)
        service.attachments.clear()


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    p = argparse.ArgumentParser(prog="lightningstor", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--root",
        type=Path,
        default=Path(env.get("LIGHTNINGSTOR_ROOT", "/var/lib/lightningstor")),
        help="volume files live here (env LIGHTNINGSTOR_ROOT)",
    )
    p.add_argument(
        "--host",
        default=env.get("LIGHTNINGSTOR_HOST", "127.0.0.1"),
        help="TCP address to listen on, port chosen at start; '' serves on <root>/ls.sock instead "
        "(env LIGHTNINGSTOR_HOST)",
    )
    p.add_argument(
        "--nodes",
        default=env.get("LIGHTNINGSTOR_NODES", ""),
        help="comma-separated node ids volumes may attach to (env LIGHTNINGSTOR_NODES)",
    )
    p.add_argument(
        "--pki",
        type=Path,
        default=env.get("LIGHTNINGSTOR_PKI"),
        required="LIGHTNINGSTOR_PKI" not in env,
        help="DEVELOPMENT PlasmaCloud PKI directory (nodeenv/plasmacloud_auth.py; made when missing): "
        "the serving certificate and the IAM key tokens are checked with (env LIGHTNINGSTOR_PKI)",
    )
    p.add_argument("--port-file", type=Path, help='written once listening: {"endpoint": "host:port"}')
    args = p.parse_args(argv)
    pki = ensure_dev_pki(args.pki, [args.host] if args.host else [])
    server, service, endpoint = serve(args.root, [n for n in args.nodes.split(",") if n], pki, host=args.host)
    if args.port_file:
        args.port_file.write_text(json.dumps({"endpoint": endpoint}))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"lightningstor VolumeService on {endpoint}, volumes in {args.root}", flush=True)
    stop.wait()
    server.stop(2).wait()
    detach_all(service)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
