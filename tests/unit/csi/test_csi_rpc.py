"""The gRPC edge: secrets stripped from logs, CsiError mapped to its status code."""

from __future__ import annotations

import grpc
import pytest

from csi.errors import AlreadyExists, CsiError, OperationPending, VolumeNotFound
from csi.rpc import STRIPPED, rpc, sanitized
from protos import csi_pb2


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self) -> None:
        self.status: tuple[grpc.StatusCode, str] | None = None

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.status = (code, details)
        raise Aborted


def test_sanitized_strips_secrets_and_mount_flags_at_every_depth() -> None:
    req = csi_pb2.CreateVolumeRequest(name="v", secrets={"password": "hunter2"})
    req.volume_capabilities.add().mount.mount_flags.append("secret-flag")
    stage = csi_pb2.NodeStageVolumeRequest(volume_id="v", secrets={"t": "tok-123"})
    text = sanitized(req) + sanitized(stage)
    assert "hunter2" not in text and "secret-flag" not in text and "tok-123" not in text
    assert STRIPPED in text and 'name: "v"' in text
    assert req.secrets["password"] == "hunter2"  # the request itself is untouched


class Servicer:
    def __init__(self, exc: BaseException | None) -> None:
        self.exc = exc

    @rpc
    def CreateVolume(self, request: object, context: object) -> str:
        if self.exc is not None:
            raise self.exc
        return "ok"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (VolumeNotFound("v"), grpc.StatusCode.NOT_FOUND),
        (AlreadyExists("x"), grpc.StatusCode.ALREADY_EXISTS),
        (OperationPending("busy"), grpc.StatusCode.ABORTED),
        (CsiError("generic"), grpc.StatusCode.INTERNAL),
    ],
)
def test_csi_errors_become_their_status(exc: CsiError, code: grpc.StatusCode) -> None:
    ctx = FakeContext()
    with pytest.raises(Aborted):
        Servicer(exc).CreateVolume(csi_pb2.CreateVolumeRequest(), ctx)
    assert ctx.status == (code, exc.msg)


def test_crashes_are_internal_without_details(caplog: pytest.LogCaptureFixture) -> None:
    ctx = FakeContext()
    req = csi_pb2.CreateVolumeRequest(name="n", secrets={"k": "crash-secret"})
    with pytest.raises(Aborted):
        Servicer(KeyError("boom-detail")).CreateVolume(req, ctx)
    assert ctx.status == (grpc.StatusCode.INTERNAL, "internal error")
    assert "crash-secret" not in caplog.text and "CreateVolume crashed" in caplog.text


def test_success_passes_through() -> None:
    assert Servicer(None).CreateVolume(csi_pb2.CreateVolumeRequest(), FakeContext()) == "ok"
