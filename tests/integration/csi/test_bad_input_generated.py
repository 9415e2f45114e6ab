"""Generated bad input at the CSI edge (Hypothesis): every Identity, Controller, GroupController and
Node RPC over the driver's real unix socket, with requests built from the messages' own
descriptors (fields missing, wrong enum values, oversized strings and maps, odd ids and paths)
and as random bytes.

Every answer is OK or a CSI status (INVALID_ARGUMENT, NOT_FOUND, ...): never UNKNOWN, never
INTERNAL from a crash (the driver logs "crashed" then), the driver keeps serving, and once
the volumes the valid requests created are deleted through the API nothing (mount, loop
device) is left. gRPC answers bytes it cannot parse with INTERNAL "Exception deserializing
request!" before our code runs, as grpc-go does: that is the protocol's own form.

Paths are generated under the driver's own temp dir only (a target path is trusted, as the
CO's, and must never point at the host's own files from a test).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import event, example, given
from hypothesis import strategies as st

from protos import csi_pb2
from tests.bad_input import LONG_TEXT, TEXT, edge_settings
from tests.conftest import require_root
from tests.integration.csi.conftest import (
    MIB,
    Driver,
    create_req,
    loops_under,
    make_root,
    mount_cap,
    mounts_under,
    teardown_root,
)

pytestmark = pytest.mark.root

SERVICES = ("csi.v1.Identity", "csi.v1.Controller", "csi.v1.GroupController", "csi.v1.Node")
METHODS: list[MethodDescriptor] = [
    m for s in SERVICES for m in csi_pb2.DESCRIPTOR.services_by_name[s.split(".")[-1]].methods
]
CRASH_STATUSES = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
DESERIALIZE = "Exception deserializing request!"
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}


class Fuzz:
    """The module's driver, one real volume (for the Controller RPCs to reach past NOT_FOUND)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.volume_id = driver.controller.CreateVolume(
            create_req("fuzz-base", 16 * MIB, mount_cap())
        ).volume.volume_id

    def call(self, method: MethodDescriptor, body: bytes) -> tuple[grpc.StatusCode, str]:
        assert self.driver.channel is not None
        path = f"/{method.containing_service.full_name}/{method.name}"
        fn = self.driver.channel.unary_unary(path, request_serializer=None, response_deserializer=None)
        try:
            fn(body, timeout=60)
        except grpc.RpcError as e:
            return e.code(), e.details() or ""
        return grpc.StatusCode.OK, ""


@pytest.fixture(scope="module")
def fuzz() -> Iterator[Fuzz]:
    require_root()
    driver = Driver(make_root(), ["--default-fs-type", "auto"])
    driver.start()
    try:
        yield Fuzz(driver)
        assert driver.proc is not None and driver.proc.poll() is None, "the driver died"
        log = driver.log_text()
        assert "crashed" not in log, log[-3000:]
        snaps = [e.snapshot for e in driver.controller.ListSnapshots(csi_pb2.ListSnapshotsRequest()).entries]
        groups: dict[str, list[str]] = {}
        for snap in snaps:
            if snap.group_snapshot_id:
                groups.setdefault(snap.group_snapshot_id, []).append(snap.snapshot_id)
        for group_id, ids in groups.items():
            driver.group.DeleteVolumeGroupSnapshot(
                csi_pb2.DeleteVolumeGroupSnapshotRequest(group_snapshot_id=group_id, snapshot_ids=ids)
            )
        for snap in snaps:
            driver.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
        for vol in driver.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries:
            driver.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume.volume_id))
        left = mounts_under(driver.root) + loops_under(driver.root)
        assert not left, f"generated requests left behind: {left}"
    finally:
        driver.stop()
        teardown_root(driver.root)


def _ids(fuzz: Fuzz, node: bool) -> st.SearchStrategy[str]:
    known = [] if node else [fuzz.volume_id]  # a Node RPC on the real volume would rightly mount it
    return st.sampled_from(["", "no-such-volume", *known]) | TEXT | LONG_TEXT


def _paths(fuzz: Fuzz) -> st.SearchStrategy[str]:
    base = str(fuzz.driver.root / "fz")
    return (
        st.sampled_from(["", "relative/no-such-path-fz", base])
        | TEXT.map(lambda t: f"{base}/{t.replace('/', '_')}")
        | (LONG_TEXT.map(lambda t: f"{base}/{t}"))
    )


def _scalar(f: FieldDescriptor, fuzz: Fuzz, node: bool) -> st.SearchStrategy[Any]:
    if f.type == FieldDescriptor.TYPE_STRING:
        if "path" in f.name:
            return _paths(fuzz)
        if f.name.endswith("_id") or f.name.endswith("_ids"):
            return _ids(fuzz, node)
        return TEXT | LONG_TEXT
    if f.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if f.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if f.type == FieldDescriptor.TYPE_ENUM:
        return st.integers(-3, 12)  # proto3 enums are open: unknown numbers arrive as such
    if f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=False, width=32)
    lo, hi = _INT_RANGES.get(f.type, (-(2**31), 2**31 - 1))
    return st.integers(lo, hi) | st.sampled_from([v for v in (0, 1, MIB, 2**40, hi) if lo <= v <= hi])


def message_of(desc: Descriptor, fuzz: Fuzz, node: bool, depth: int = 0) -> st.SearchStrategy[Message]:
    """Any subset of the fields of `desc`, each with a generated value of its type."""
    cls = GetMessageClass(desc)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        msg = cls()
        for f in desc.fields:
            if not draw(st.booleans()):
                continue  # missing
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                kv = f.message_type.fields_by_name
                big = draw(st.booleans())
                keys = st.text(max_size=300) if big else TEXT
                values = _scalar(kv["value"], fuzz, node) if kv["value"].message_type is None else None
                if values is not None:
                    getattr(msg, f.name).update(
                        draw(st.dictionaries(keys, values, max_size=200 if big else 4))
                    )
            elif f.message_type is not None:
                if depth >= 3 or f.message_type.full_name.startswith("google.protobuf"):
                    continue
                n = draw(st.integers(1, 3)) if f.is_repeated else 1
                subs = [draw(message_of(f.message_type, fuzz, node, depth + 1)) for _ in range(n)]
                if f.is_repeated:
                    getattr(msg, f.name).extend(subs)
                else:
                    getattr(msg, f.name).CopyFrom(subs[0])
            elif f.is_repeated:
                getattr(msg, f.name).extend(draw(st.lists(_scalar(f, fuzz, node), max_size=5)))
            else:
                setattr(msg, f.name, draw(_scalar(f, fuzz, node)))
        return msg

    return build()


@edge_settings(max_examples=800)
@given(data=st.data())
def test_every_rpc_answers_generated_requests_with_a_csi_status(fuzz: Fuzz, data: st.DataObject) -> None:
    method = data.draw(st.sampled_from(METHODS), "method")
    node = method.containing_service.name == "Node"
    as_bytes = st.binary(max_size=300)
    body = data.draw(
        message_of(method.input_type, fuzz, node).map(lambda m: m.SerializeToString()) | as_bytes, "request"
    )
    code, details = fuzz.call(method, body)
    event(f"{method.name}: {code.name}")  # --hypothesis-show-statistics shows how deep the inputs got
    assert code not in CRASH_STATUSES or details == DESERIALIZE, (method.name, code, details)
    assert fuzz.driver.identity.Probe(csi_pb2.ProbeRequest(), timeout=10).ready.value


@edge_settings(max_examples=100)
@given(method=st.sampled_from([m.full_name for m in METHODS]), body=st.binary(max_size=300))
# a path name longer than the kernel's 255 bytes crashed NodeUnpublishVolume (ENAMETOOLONG -> INTERNAL)
@example(method="csi.v1.Node.NodeUnpublishVolume", body=b"\n\x01v\x12\xad\x02/" + b"a" * 300)
# a 300-character snapshot id was taken as a file name to unlink (ENAMETOOLONG -> INTERNAL)
@example(method="csi.v1.Controller.DeleteSnapshot", body=b"\n\xac\x02" + b"a" * 300)
# proto3 enums are open: an undefined access mode crashed the driver (ValueError naming it)
@example(
    method="csi.v1.Node.NodeStageVolume",
    body=b'\n\x010\x1a\x01r"\x0f\n\x00\x1a\x0b\x08' + b"\xff" * 9 + b"\x01",
)
def test_serialized_requests_get_a_csi_status(fuzz: Fuzz, method: str, body: bytes) -> None:
    """Random (and pinned) bytes as the serialized request of any RPC."""
    desc = next(m for m in METHODS if m.full_name == method)
    code, details = fuzz.call(desc, body)
    assert code not in CRASH_STATUSES or details == DESERIALIZE, (method, code, details)


def test_an_unknown_snapshot_id_never_names_a_file(fuzz: Fuzz) -> None:
    """DeleteSnapshot("../volumes/<id>") deleted that live volume's backing file (the id was a path)."""
    ctl = fuzz.driver.controller
    vol = ctl.CreateVolume(create_req("not-a-snapshot", 16 * MIB, mount_cap())).volume.volume_id
    ctl.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=f"../volumes/{vol}"))  # idempotent: OK
    got = ctl.ControllerGetVolume(csi_pb2.ControllerGetVolumeRequest(volume_id=vol))
    assert not got.status.volume_condition.abnormal, got.status.volume_condition.message
    assert list(fuzz.driver.state_dir.glob(f"**/{vol}.img")), "the volume's backing file is gone"
