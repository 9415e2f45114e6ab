"""Pure request parsing and sizing rules (csi/wire.py)."""

from __future__ import annotations

import pytest

from csi import wire
from csi.errors import InvalidArgument, InvalidToken, OutOfRange
from protos import csi_pb2

MIB, GIB = 1 << 20, 1 << 30
Mode = csi_pb2.VolumeCapability.AccessMode


def cap(access: str = "mount", fs: str = "", mode: int = Mode.SINGLE_NODE_WRITER) -> csi_pb2.VolumeCapability:
    c = csi_pb2.VolumeCapability(access_mode=csi_pb2.VolumeCapability.AccessMode(mode=mode))
    if access == "mount":
        c.mount.fs_type = fs
    elif access == "block":
        c.block.SetInParent()
    return c


def rng(required: int = 0, limit: int = 0) -> csi_pb2.CapacityRange:
    return csi_pb2.CapacityRange(required_bytes=required, limit_bytes=limit)


def test_capability_parses_mount_and_block() -> None:
    m = wire.capability(cap("mount", "xfs"))
    assert (m.access_type, m.fs_type, m.readonly) == ("mount", "xfs", False)
    b = wire.capability(cap("block", mode=Mode.MULTI_NODE_READER_ONLY))
    assert (b.access_type, b.fs_type, b.readonly) == ("block", "", True)


@pytest.mark.parametrize(
    "bad",
    [
        cap("none"),
        cap(mode=Mode.UNKNOWN),
        cap(mode=Mode.MULTI_NODE_MULTI_WRITER),
        cap("mount", "btrfs"),
    ],
)
def test_unsupported_capabilities_are_invalid_argument(bad: csi_pb2.VolumeCapability) -> None:
    with pytest.raises(InvalidArgument):
        wire.capability(bad)
    assert not wire.is_supported(bad)


def test_capabilities_need_one_and_one_kind() -> None:
    with pytest.raises(InvalidArgument):
        wire.capabilities([])
    with pytest.raises(InvalidArgument):
        wire.capabilities([cap("mount"), cap("block")])


def test_volume_fs_type_defaults_and_conflicts() -> None:
    assert wire.volume_fs_type(wire.capabilities([cap("mount")]), "xfs") == "xfs"
    assert wire.volume_fs_type(wire.capabilities([cap("block")])) == ""
    with pytest.raises(InvalidArgument):
        wire.volume_fs_type(wire.capabilities([cap("mount", "ext4"), cap("mount", "xfs")]))


def test_supported_honours_the_volume_access_type() -> None:
    assert wire.supported(cap("block"), "block") and not wire.supported(cap("block"), "mount")
    assert wire.supported(cap("block"), "any") and wire.supported(cap("mount"), "any")


@pytest.mark.parametrize(
    ("capacity", "fs", "floor", "expected"),
    [
        (None, "ext4", 0, GIB),  # no range: the 1 GiB default
        (rng(limit=100 * MIB), "ext4", 0, 100 * MIB),  # default clamped to the limit
        (rng(required=1), "ext4", 0, MIB),  # rounded up to whole MiB
        (rng(required=300 * MIB), "xfs", 0, 300 * MIB),  # xfs's minimum itself
        (None, "xfs", 0, GIB),  # no range: the default is above xfs's minimum
        (rng(required=10 * MIB), "", 64 * MIB, 64 * MIB),  # content (snapshot) floor
        (rng(required=5 * GIB, limit=5 * GIB), "ext4", 0, 5 * GIB),
    ],
)
def test_size_from_range(capacity: csi_pb2.CapacityRange | None, fs: str, floor: int, expected: int) -> None:
    assert wire.size_from_range(capacity, fs_type=fs, max_bytes=1 << 40, floor=floor) == expected


def test_size_from_range_errors() -> None:
    with pytest.raises(InvalidArgument):
        wire.size_from_range(rng(required=-1), fs_type="", max_bytes=GIB)
    with pytest.raises(InvalidArgument):
        wire.size_from_range(rng(required=2 * MIB, limit=MIB), fs_type="", max_bytes=GIB)
    with pytest.raises(OutOfRange):
        wire.size_from_range(rng(required=10 * MIB, limit=20 * MIB), fs_type="xfs", max_bytes=GIB)


def test_xfs_below_its_minimum_is_refused_with_the_minimum_named_never_tripled() -> None:
    with pytest.raises(OutOfRange, match="at least 300 MiB"):
        wire.size_from_range(rng(required=100 * MIB), fs_type="xfs", max_bytes=GIB)
    with pytest.raises(OutOfRange, match="at least 300 MiB"):
        wire.size_from_range(rng(limit=100 * MIB), fs_type="xfs", max_bytes=GIB)


def test_auto_default_gives_small_requests_ext4_instead_of_a_300_mib_xfs() -> None:
    mount = [wire.capability(cap("mount"))]
    named = [wire.capability(cap("mount", "xfs"))]
    assert wire.volume_fs_type(mount, "xfs", small_fallback="ext4", requested=100 * MIB) == "ext4"
    assert wire.volume_fs_type(mount, "xfs", small_fallback="ext4", requested=300 * MIB) == "xfs"
    assert wire.volume_fs_type(mount, "xfs", small_fallback="ext4", requested=0) == "xfs"  # 1 GiB default
    assert wire.volume_fs_type(named, "ext4", small_fallback="ext4", requested=100 * MIB) == "xfs"
    assert wire.volume_fs_type(mount, "xfs", requested=100 * MIB) == "xfs"  # fixed default: no fallback
    with pytest.raises(OutOfRange):
        wire.size_from_range(rng(required=2 * GIB), fs_type="", max_bytes=GIB)
    with pytest.raises(OutOfRange):
        wire.size_from_range(rng(limit=10 * MIB), fs_type="", max_bytes=GIB, floor=20 * MIB)


def test_in_range() -> None:
    assert wire.in_range(GIB, None)
    assert wire.in_range(GIB, rng(required=GIB, limit=GIB))
    assert not wire.in_range(GIB, rng(required=2 * GIB))
    assert not wire.in_range(2 * GIB, rng(required=GIB, limit=GIB))


def test_tokens_round_trip_and_reject_forgeries() -> None:
    token = wire.page_token("vol-abc")
    assert wire.token_start(token) == "vol-abc"
    for bad in (
        "invalid-token",
        "",
        ".",
        "dm9sLWFiYw==.00000000",
        token[:-1] + "0" if token[-1] != "0" else token[:-1] + "1",
    ):
        with pytest.raises(InvalidToken):
            wire.token_start(bad)


def test_paginate_continues_after_deletions() -> None:
    ids = ["a", "b", "c", "d", "e"]
    start, end, token = wire.paginate(ids, 2, "")
    assert (start, end) == (0, 2) and wire.token_start(token) == "b"  # the cursor: last id returned
    # "c" (the next page's first entry) was deleted meanwhile: the page starts at "d"
    start, end, token2 = wire.paginate(["a", "b", "d", "e"], 0, token)
    assert (start, end, token2) == (2, 4, "")
    with pytest.raises(InvalidArgument):
        wire.paginate(ids, -1, "")


def test_paginate_cursor_survives_changes_on_both_sides_of_it() -> None:
    _, _, token = wire.paginate(["a", "c", "e", "g"], 2, "")  # page 1: a, c
    # meanwhile "c" (the cursor itself) and "a" are deleted, "b" and "d" added
    now = ["b", "d", "e", "g"]
    start, end, token = wire.paginate(now, 2, token)
    assert now[start:end] == ["d", "e"]  # no repeat, nothing after the cursor skipped
    start, end, token = wire.paginate(now, 2, token)
    assert (now[start:end], token) == (["g"], "")
