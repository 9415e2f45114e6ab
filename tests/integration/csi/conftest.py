"""The real `lightningstor-csi` process on a real unix socket, with loop devices and mounts.

Everything a test creates lives under one short temp dir; the fixtures unmount and
detach everything under it (csi.cleanup.release_under) even when the test failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from csi.cleanup import release_under
from nodeenv.lightningstor import FakeVolumeService, serve
from nodeenv.plasmacloud_auth import DevPki
from protos import csi_pb2, csi_pb2_grpc
from tests.conftest import require_root
from tests.integration.csi.sanity_resources import Resources, SanityContext

REPO = Path(__file__).resolve().parents[3]
NODE_ID = "csi-test-node"
GIB = 1 << 30
MIB = 1 << 20
Mode = csi_pb2.VolumeCapability.AccessMode


@dataclass
class Driver:
    """One driver process; `restart()` keeps its state dir."""

    root: Path
    extra_args: list[str] = field(default_factory=list)
    node_id: str = NODE_ID
    proc: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None

    @property
    def socket(self) -> Path:
        return self.root / "csi.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    def start(self) -> None:
        argv = [sys.executable, "-m", "csi.main", "--mode", "all", "--endpoint", self.endpoint]
        argv += ["--node-id", self.node_id, "--state-dir", str(self.state_dir)]
        argv += ["--kubelet-dir", "/tmp", *self.extra_args]  # every test's roots (a later flag wins)
        log = (self.root / "driver.log").open("ab")
        self.proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        self.channel = grpc.insecure_channel(self.endpoint)
        wait_ready(self.identity, self.proc)

    def stop(self) -> int:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        return code

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def identity(self) -> csi_pb2_grpc.IdentityStub:
        assert self.channel is not None
        return csi_pb2_grpc.IdentityStub(self.channel)

    @property
    def controller(self) -> csi_pb2_grpc.ControllerStub:
        assert self.channel is not None
        return csi_pb2_grpc.ControllerStub(self.channel)

    @property
    def group(self) -> csi_pb2_grpc.GroupControllerStub:
        assert self.channel is not None
        return csi_pb2_grpc.GroupControllerStub(self.channel)

    @property
    def node(self) -> csi_pb2_grpc.NodeStub:
        assert self.channel is not None
        return csi_pb2_grpc.NodeStub(self.channel)

    def log_text(self) -> str:
        return (self.root / "driver.log").read_text(errors="replace")


def wait_ready(
    identity: csi_pb2_grpc.IdentityStub, proc: subprocess.Popen[bytes], timeout: float = 20
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"driver exited with {proc.returncode}")
        try:
            if identity.Probe(csi_pb2.ProbeRequest(), timeout=1).ready.value:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.05)
    raise RuntimeError("driver never became ready")


def make_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="csit-", dir="/tmp"))


def teardown_root(root: Path) -> list[str]:
    released = release_under(root)
    shutil.rmtree(root, ignore_errors=True)
    return released


@pytest.fixture
def driver() -> Iterator[Driver]:
    require_root()
    d = Driver(make_root())
    try:
        d.start()
        yield d
    finally:
        d.stop()
        teardown_root(d.root)


@pytest.fixture(scope="session")
def sanity_driver() -> Iterator[Driver]:
    require_root()
    # auto: xfs where the kernel would refuse online ext4 growth (no CAP_SYS_RESOURCE), as node-up runs it
    d = Driver(make_root(), ["--default-fs-type", "auto"])
    try:
        d.start()
        yield d
    finally:
        d.stop()
        teardown_root(d.root)


@pytest.fixture
def sc(sanity_driver: Driver) -> Iterator[SanityContext]:
    base = sanity_driver.root / f"spec-{uuid.uuid4().hex[:8]}"
    (base / "target").mkdir(parents=True)
    (base / "staging").mkdir()
    yield SanityContext(
        controller=sanity_driver.controller,
        node=sanity_driver.node,
        identity=sanity_driver.identity,
        target_path=str(base / "target"),
        staging_path=str(base / "staging"),
        group=sanity_driver.group,
    )
    shutil.rmtree(base)  # fails (and so fails the spec) if anything is still mounted under it


@pytest.fixture
def r(sc: SanityContext) -> Iterator[Resources]:
    res = Resources(sc)
    yield res
    res.cleanup()


def status_of(call: Callable[[], object]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def mount_cap(
    fs_type: str = "", mode: int = Mode.SINGLE_NODE_WRITER, flags: tuple[str, ...] = ()
) -> csi_pb2.VolumeCapability:
    return csi_pb2.VolumeCapability(
        mount=csi_pb2.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(flags)),
        access_mode=csi_pb2.VolumeCapability.AccessMode(mode=mode),
    )


def block_cap(mode: int = Mode.SINGLE_NODE_WRITER) -> csi_pb2.VolumeCapability:
    return csi_pb2.VolumeCapability(
        block=csi_pb2.VolumeCapability.BlockVolume(),
        access_mode=csi_pb2.VolumeCapability.AccessMode(mode=mode),
    )


def create_req(
    name: str, size: int = 64 * MIB, cap: csi_pb2.VolumeCapability | None = None, limit: int = 0
) -> csi_pb2.CreateVolumeRequest:
    return csi_pb2.CreateVolumeRequest(
        name=name,
        capacity_range=csi_pb2.CapacityRange(required_bytes=size, limit_bytes=limit),
        volume_capabilities=[cap or mount_cap()],
        parameters={"type": "ssd", "replication": "1"},
    )


def loops_under(root: Path, settle: float = 10.0) -> list[str]:
    """Loop devices backed by files under `root`. One the driver detached while another mount
    namespace still held it (a container being created copies the mount table) is gone once that
    holder closes it, so those (autoclear set) get `settle` seconds; any other is a leak at once."""
    deadline = time.monotonic() + settle
    while True:
        argv = ["losetup", "--list", "--noheadings", "--raw", "-O", "NAME,AUTOCLEAR,BACK-FILE"]
        rows = [
            r.split(" ", 2) for r in subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()
        ]
        mine = [r for r in rows if len(r) == 3 and str(root) in r[2]]
        if not any(r[1] == "1" for r in mine) or time.monotonic() > deadline:
            return [" ".join(r) for r in mine]
        time.sleep(0.1)


def mounts_under(root: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(root) in line]


def fs_of(path: Path) -> str:
    return subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", str(path)], capture_output=True, text=True
    ).stdout.strip()


def fs_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def has_cap_sys_resource() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 24))
    return False


def publish_all(
    driver: Driver,
    volume_id: str,
    cap: csi_pb2.VolumeCapability,
    staging: Path,
    target: Path,
    readonly: bool = False,
    controller: Driver | None = None,
) -> dict[str, str]:
    """ControllerPublish (on `controller`, default `driver`) to `driver`'s node, then stage and publish."""
    pub = (controller or driver).controller.ControllerPublishVolume(
        csi_pb2.ControllerPublishVolumeRequest(
            volume_id=volume_id, node_id=driver.node_id, volume_capability=cap
        )
    )
    staging.mkdir(parents=True, exist_ok=True)
    driver.node.NodeStageVolume(
        csi_pb2.NodeStageVolumeRequest(
            volume_id=volume_id,
            staging_target_path=str(staging),
            volume_capability=cap,
            publish_context=pub.publish_context,
        )
    )
    driver.node.NodePublishVolume(
        csi_pb2.NodePublishVolumeRequest(
            volume_id=volume_id,
            staging_target_path=str(staging),
            target_path=str(target),
            volume_capability=cap,
            publish_context=pub.publish_context,
            readonly=readonly,
        )
    )
    return dict(pub.publish_context)


def teardown_all(driver: Driver, volume_id: str, staging: Path, target: Path) -> None:
    driver.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target))
    )
    driver.node.NodeUnstageVolume(
        csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging))
    )
    driver.controller.ControllerUnpublishVolume(
        csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=driver.node_id)
    )
    driver.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume_id))


@contextlib.contextmanager
def lightningstor_driver(
    pki: DevPki, *, own_kubelet_dir: bool = False
) -> Iterator[tuple[Driver, FakeVolumeService]]:
    """A driver with the `lightningstor` backend on an in-process VolumeService (real loop devices,
    TLS + token with `pki`); own_kubelet_dir: its --kubelet-dir is <root>/kubelet instead of /tmp."""
    require_root()
    root = make_root()
    server, service, endpoint = serve(root / "ls", [NODE_ID], pki)
    argv = ["--backend", "lightningstor", "--lightningstor-endpoint", endpoint, *pki.client_flags()]
    if own_kubelet_dir:
        (root / "kubelet").mkdir()
        argv += ["--kubelet-dir", str(root / "kubelet")]
    d = Driver(root, argv)
    try:
        d.start()
        yield d, service
    finally:
        d.stop()
        server.stop(None)
        teardown_root(root)
