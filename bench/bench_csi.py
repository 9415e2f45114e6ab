"""LightningStor CSI figures: the real driver process, real loop devices, mkfs and mounts (root).

  CreateVolume+DeleteVolume, 100 volumes each for mount and block: p50/p95/p99
  NodeStage+NodePublish (first stage includes mkfs) and NodeUnpublish+NodeUnstage, ext4 and xfs
  create/delete cycles per second with 8 concurrent clients
  one whole lifecycle per volume (create, attach, stage, publish, unpublish, unstage, detach, delete)
  Probe latency
  GetSnapshot latency
  ControllerModifyVolume: parameter change -> the new limit read back from the kernel's cgroup
  throttle file, and dd O_DIRECT throughput against a limit (is it in force?)
  CreateVolumeGroupSnapshot of 4 published ext4 volumes (+ delete), beside its floor:
  freezing the 4 filesystems and copying the 4 files with no driver in between
  wall time of the csi-sanity mirror (tests/integration/csi/test_sanity*.py)

`make bench BENCH=csi`. Volumes are 1 GiB sparse files; everything lives in a temp dir
that is unmounted, detached and removed at the end.
"""

from __future__ import annotations

import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from csi import freeze, iothrottle
from csi.cleanup import release_under
from protos import csi_pb2, csi_pb2_grpc

REPO = Path(__file__).resolve().parent.parent
NODE = "bench-node"
GIB = 1 << 30
Mode = csi_pb2.VolumeCapability.AccessMode


def cap(kind: str, fs: str = "") -> csi_pb2.VolumeCapability:
    c = csi_pb2.VolumeCapability(
        access_mode=csi_pb2.VolumeCapability.AccessMode(mode=Mode.SINGLE_NODE_WRITER)
    )
    if kind == "block":
        c.block.SetInParent()
    else:
        c.mount.fs_type = fs
    return c


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def ms(samples: list[float]) -> str:
    return (
        f"p50 {statistics.median(samples) * 1000:7.2f} ms  p95 {pct(samples, 95) * 1000:7.2f} ms  "
        f"p99 {pct(samples, 99) * 1000:7.2f} ms  (n={len(samples)})"
    )


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        endpoint = f"unix://{root / 'csi.sock'}"
        argv = [sys.executable, "-m", "csi.main", "--endpoint", endpoint, "--node-id", NODE]
        argv += ["--state-dir", str(root / "state"), "--kubelet-dir", str(root), "--log-level", "warning"]
        self.proc = subprocess.Popen(argv, cwd=REPO, stderr=(root / "driver.log").open("wb"))
        self.channel = grpc.insecure_channel(endpoint)
        self.identity = csi_pb2_grpc.IdentityStub(self.channel)
        self.c = csi_pb2_grpc.ControllerStub(self.channel)
        self.n = csi_pb2_grpc.NodeStub(self.channel)
        self.g = csi_pb2_grpc.GroupControllerStub(self.channel)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.identity.Probe(csi_pb2.ProbeRequest(), timeout=1).ready.value:
                    return
            except grpc.RpcError:
                time.sleep(0.05)
        raise RuntimeError("driver did not start")

    def stop(self) -> None:
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)

    def create(self, name: str, c: csi_pb2.VolumeCapability) -> str:
        req = csi_pb2.CreateVolumeRequest(
            name=name, capacity_range=csi_pb2.CapacityRange(required_bytes=GIB), volume_capabilities=[c]
        )
        return str(self.c.CreateVolume(req).volume.volume_id)

    def delete(self, volume_id: str) -> None:
        self.c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume_id))

    def paths(self, volume_id: str) -> tuple[str, str]:
        staging = self.root / "stage" / volume_id
        staging.mkdir(parents=True, exist_ok=True)
        return str(staging), str(self.root / "pods" / volume_id / "mount")

    def attach(self, volume_id: str, c: csi_pb2.VolumeCapability) -> dict[str, str]:
        req = csi_pb2.ControllerPublishVolumeRequest(volume_id=volume_id, node_id=NODE, volume_capability=c)
        return dict(self.c.ControllerPublishVolume(req).publish_context)

    def detach(self, volume_id: str) -> None:
        self.c.ControllerUnpublishVolume(
            csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=NODE)
        )

    def stage_publish(self, volume_id: str, c: csi_pb2.VolumeCapability, ctx: dict[str, str]) -> None:
        staging, target = self.paths(volume_id)
        self.n.NodeStageVolume(
            csi_pb2.NodeStageVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, volume_capability=c, publish_context=ctx
            )
        )
        self.n.NodePublishVolume(
            csi_pb2.NodePublishVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, target_path=target, volume_capability=c,
                publish_context=ctx,
            )
        )  # fmt: skip

    def unpublish_unstage(self, volume_id: str) -> None:
        staging, target = self.paths(volume_id)
        self.n.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target)
        )
        self.n.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging)
        )


def create_delete(b: Bench) -> None:
    for kind in ("mount", "block"):
        samples = []
        for i in range(100):
            samples.append(timed(lambda i=i, k=kind: b.delete(b.create(f"cd-{k}-{i}", cap(k)))))
        print(f"CreateVolume+DeleteVolume {kind:5s}      {ms(samples)}")


def stage_publish(b: Bench) -> None:
    for fs in ("ext4", "xfs"):
        c, up, down = cap("mount", fs), [], []
        for i in range(15):
            vid = b.create(f"sp-{fs}-{i}", c)
            ctx = b.attach(vid, c)
            up.append(timed(lambda vid=vid, ctx=ctx, c=c: b.stage_publish(vid, c, ctx)))
            down.append(timed(lambda vid=vid: b.unpublish_unstage(vid)))
            b.detach(vid)
            b.delete(vid)
        print(f"NodeStage+NodePublish {fs:4s} (with mkfs)  {ms(up)}")
        print(f"NodeUnpublish+NodeUnstage {fs:4s}        {ms(down)}")


def concurrent_cycles(b: Bench, clients: int = 8, per_client: int = 60) -> None:
    errors: list[str] = []

    def worker(w: int) -> None:
        for i in range(per_client):
            try:
                b.delete(b.create(f"cc-{w}-{i}", cap("mount")))
            except grpc.RpcError as e:
                errors.append(e.code().name)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    n = clients * per_client
    rate = n / elapsed
    print(f"create/delete cycles, {clients} concurrent clients: {rate:7.1f}/s (n={n}, errors {len(errors)})")


def lifecycle(b: Bench) -> None:
    for fs in ("ext4", "xfs"):
        c, samples = cap("mount", fs), []
        for i in range(10):

            def one(i: int = i, fs: str = fs, c: csi_pb2.VolumeCapability = c) -> None:
                vid = b.create(f"lc-{fs}-{i}", c)
                b.stage_publish(vid, c, b.attach(vid, c))
                b.unpublish_unstage(vid)
                b.detach(vid)
                b.delete(vid)

            samples.append(timed(one))
        print(f"whole lifecycle per volume {fs:4s}       {ms(samples)}")


def probe(b: Bench) -> None:
    samples = [timed(lambda: b.identity.Probe(csi_pb2.ProbeRequest())) for _ in range(300)]
    print(f"Probe                                {ms(samples)}  max {max(samples) * 1000:.2f} ms")


def get_snapshot(b: Bench) -> None:
    vid = b.create("gs-src", cap("mount", "ext4"))
    snap = b.c.CreateSnapshot(csi_pb2.CreateSnapshotRequest(name="gs", source_volume_id=vid)).snapshot
    req = csi_pb2.GetSnapshotRequest(snapshot_id=snap.snapshot_id)
    samples = [timed(lambda: b.c.GetSnapshot(req)) for _ in range(300)]
    print(f"GetSnapshot                          {ms(samples)}")
    b.c.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
    b.delete(vid)


def published(b: Bench, name: str) -> tuple[str, str]:
    """A published ext4 volume: (volume id, device)."""
    c = cap("mount", "ext4")
    vid = b.create(name, c)
    ctx = b.attach(vid, c)
    b.stage_publish(vid, c, ctx)
    return vid, ctx["device_path"]


def retire(b: Bench, vid: str) -> None:
    b.unpublish_unstage(vid)
    b.detach(vid)
    b.delete(vid)


def dd_direct_mib_s(path: Path, mib: int) -> float:
    argv = ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "oflag=direct", "status=none"]
    return mib / timed(lambda: subprocess.run(argv, check=True))


def modify_volume(b: Bench) -> None:
    throttle = iothrottle.detect("auto")
    if throttle is None:
        print("ControllerModifyVolume: no cgroup I/O throttle on this node; skipped")
        return
    vid, device = published(b, "qos")
    samples = []
    for i in range(60):
        want = (8 + i % 2) << 20

        def change(want: int = want) -> None:
            b.c.ControllerModifyVolume(
                csi_pb2.ControllerModifyVolumeRequest(
                    volume_id=vid, mutable_parameters={"writeBytesPerSecond": str(want)}
                )
            )
            if throttle.current(device).write_bps != want:
                raise RuntimeError("limit not in force when ControllerModifyVolume returned")

        samples.append(timed(change))
    print(f"ModifyVolume -> limit in force       {ms(samples)}")
    target = Path(b.paths(vid)[1])
    limited = dd_direct_mib_s(target / "limited", 16)  # the last change left 9 MiB/s
    b.c.ControllerModifyVolume(
        csi_pb2.ControllerModifyVolumeRequest(volume_id=vid, mutable_parameters={"qosClass": "unlimited"})
    )
    free = dd_direct_mib_s(target / "free", 64)
    print(f"  dd O_DIRECT write: {limited:6.1f} MiB/s at a 9 MiB/s limit, {free:7.1f} MiB/s unlimited")
    retire(b, vid)


def group_snapshot(b: Bench, members: int = 4, rounds: int = 20) -> None:
    vols = [published(b, f"grp-{i}")[0] for i in range(members)]
    for vid in vols:
        subprocess.run(
            ["dd", "if=/dev/urandom", f"of={b.paths(vid)[1]}/data", "bs=1M", "count=16", "status=none"],
            check=True,
        )
    samples = []
    for i in range(rounds):

        def one(i: int = i) -> None:
            req = csi_pb2.CreateVolumeGroupSnapshotRequest(name=f"g{i}", source_volume_ids=vols)
            group = b.g.CreateVolumeGroupSnapshot(req).group_snapshot
            b.g.DeleteVolumeGroupSnapshot(
                csi_pb2.DeleteVolumeGroupSnapshotRequest(
                    group_snapshot_id=group.group_snapshot_id,
                    snapshot_ids=[s.snapshot_id for s in group.snapshots],
                )
            )

        samples.append(timed(one))
    print(f"group snapshot of {members} volumes (+delete) {ms(samples)}")
    files = [b.root / "state" / "volumes" / f"{v}.img" for v in vols]
    floor = []
    for i in range(rounds):

        def bare(i: int = i) -> None:
            copies = [b.root / f"floor-{i}-{n}.img" for n in range(members)]
            with freeze.frozen(files):
                for src, dst in zip(files, copies, strict=True):
                    argv = ["cp", "--sparse=always", "--reflink=auto", str(src), str(dst)]
                    subprocess.run(argv, check=True)
            for dst in copies:
                dst.unlink()

        floor.append(timed(bare))
    print(f"  floor: freeze {members} + cp {members} + thaw   {ms(floor)}")
    for vid in vols:
        retire(b, vid)


def sanity_suite() -> None:
    files = [f"tests/integration/csi/test_sanity{s}.py" for s in ("", "_snapshot", "_node", "_modify_group")]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - t0
    summary = (proc.stdout.strip().splitlines() or ["?"])[-1]
    print(f"csi-sanity mirror suite wall time: {elapsed:6.2f} s  ({summary})")


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="csib-", dir="/tmp"))
    b = Bench(root)
    try:
        create_delete(b)
        stage_publish(b)
        concurrent_cycles(b)
        lifecycle(b)
        probe(b)
        get_snapshot(b)
        modify_volume(b)
        group_snapshot(b)
    finally:
        b.stop()
        release_under(root)
        shutil.rmtree(root, ignore_errors=True)
    sanity_suite()


if __name__ == "__main__":
    main()
