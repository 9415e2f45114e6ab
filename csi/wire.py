"""CSI request pieces parsed once at the edge into frozen dataclasses, plus the sizing rules.

Pure functions: no I/O, no backend; unit-tested in tests/unit/csi/test_wire.py.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from csi.backends.base import GIB, MIB, AccessType, VolumeAccess
from csi.errors import InvalidArgument, InvalidToken, OutOfRange
from csi.mounts import DEFAULT_FS, SUPPORTED_FS
from protos import csi_pb2

Mode = csi_pb2.VolumeCapability.AccessMode
SUPPORTED_MODES = frozenset(
    {
        Mode.SINGLE_NODE_WRITER,
        Mode.SINGLE_NODE_READER_ONLY,
        Mode.SINGLE_NODE_SINGLE_WRITER,
        Mode.SINGLE_NODE_MULTI_WRITER,
        Mode.MULTI_NODE_READER_ONLY,
    }
)
READ_ONLY_MODES = frozenset({Mode.SINGLE_NODE_READER_ONLY, Mode.MULTI_NODE_READER_ONLY})
DEFAULT_SIZE = GIB
MIN_SIZE = {"xfs": 300 * MIB, "ext4": MIB, "": MIB}
"""mkfs.xfs (xfsprogs 6) refuses filesystems smaller than 300 MiB."""
XFS_MIN_MESSAGE = (
    "xfs volumes need at least 300 MiB (the smallest filesystem mkfs.xfs of xfsprogs 6 makes); "
    "ask for >= 300Mi or use fsType ext4"
)


PATH_MAX, NAME_MAX = 4096, 255


def require(**fields: object) -> None:
    """INVALID_ARGUMENT naming the first of `fields` that is empty or unset."""
    for name, value in fields.items():
        if not value:
            raise InvalidArgument(f"{name} is required")


def require_paths(**paths: str) -> None:
    """INVALID_ARGUMENT for a given path the kernel would refuse (NUL, longer than PATH_MAX or NAME_MAX).

    Relative paths pass: csi-sanity sends "some/path" and expects the volume's own answer."""
    for name, value in paths.items():
        if not value:
            continue
        raw = value.encode("utf-8", "surrogateescape")
        if b"\0" in raw:
            raise InvalidArgument(f"{name} must not contain NUL, got {value!r:.120}")
        if len(raw) >= PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/")):
            raise InvalidArgument(
                f"{name} is longer than the kernel allows ({PATH_MAX - 1} bytes, {NAME_MAX} per name), "
                f"got {len(raw)} bytes"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Capability:
    access_type: AccessType
    fs_type: str
    mount_flags: tuple[str, ...]
    mode: int

    @property
    def readonly(self) -> bool:
        return self.mode in READ_ONLY_MODES


def _mode_name(mode: int) -> str:
    """The enum's name; proto3 enums are open, so a client may send a number that has none."""
    value = Mode.Mode.DESCRIPTOR.values_by_number.get(mode)
    return value.name if value is not None else f"{mode} (undefined)"


def capability(cap: csi_pb2.VolumeCapability, *, strict: bool = True) -> Capability:
    """Parse one VolumeCapability; strict=True raises InvalidArgument for what we don't support."""
    which = cap.WhichOneof("access_type")
    if which is None:
        raise InvalidArgument("volume_capability.access_type (mount or block) is required")
    if not cap.HasField("access_mode") or cap.access_mode.mode == Mode.UNKNOWN:
        raise InvalidArgument("volume_capability.access_mode is required")
    if strict and cap.access_mode.mode not in SUPPORTED_MODES:
        raise InvalidArgument(f"access mode {_mode_name(cap.access_mode.mode)} is not supported")
    fs_type = cap.mount.fs_type if which == "mount" else ""
    if strict and fs_type and fs_type not in SUPPORTED_FS:
        raise InvalidArgument(f"fs_type {fs_type!r} is not supported (supported: {', '.join(SUPPORTED_FS)})")
    return Capability(
        access_type="mount" if which == "mount" else "block",
        fs_type=fs_type,
        mount_flags=tuple(cap.mount.mount_flags) if which == "mount" else (),
        mode=cap.access_mode.mode,
    )


def capabilities(caps: Sequence[csi_pb2.VolumeCapability]) -> list[Capability]:
    if not caps:
        raise InvalidArgument("volume_capabilities are required")
    parsed = [capability(c) for c in caps]
    if len({c.access_type for c in parsed}) > 1:
        raise InvalidArgument("a volume is either block or mount, not both")
    return parsed


def supported(cap: csi_pb2.VolumeCapability, access_type: VolumeAccess) -> bool:
    try:
        parsed = capability(cap)
    except InvalidArgument:
        return False
    return access_type in ("any", parsed.access_type)


def is_supported(cap: csi_pb2.VolumeCapability) -> bool:
    try:
        capability(cap)
    except InvalidArgument:
        return False
    return True


def volume_fs_type(
    caps: Sequence[Capability], default: str = DEFAULT_FS, *, small_fallback: str = "", requested: int = 0
) -> str:
    """The filesystem of a new volume: the one its capabilities name, else `default`.

    `small_fallback` (what `--default-fs-type auto` sets): when the default is xfs and the
    request is below xfs's minimum, the volume gets this filesystem (ext4) instead of being
    tripled to 300 MiB.
    """
    if caps[0].access_type == "block":
        return ""
    types = {c.fs_type for c in caps if c.fs_type}
    if len(types) > 1:
        raise InvalidArgument(f"conflicting fs_types {sorted(types)}")
    if types:
        return types.pop()
    if small_fallback and 0 < requested < MIN_SIZE.get(default, MIB):
        return small_fallback
    return default


def round_up(n: int, unit: int = MIB) -> int:
    return -(-n // unit) * unit


def size_from_range(
    rng: csi_pb2.CapacityRange | None, *, fs_type: str, max_bytes: int, floor: int = 0
) -> int:
    """The size to provision for a capacity range: at least required, at most limit.

    `floor` is a size the content needs (a snapshot being restored). Sizes are whole MiB.
    """
    required = rng.required_bytes if rng is not None else 0
    limit = rng.limit_bytes if rng is not None else 0
    if required < 0 or limit < 0:
        raise InvalidArgument("capacity_range bytes must not be negative")
    if limit and required > limit:
        raise InvalidArgument(f"required_bytes {required} exceeds limit_bytes {limit}")
    size = required or (min(DEFAULT_SIZE, limit) if limit else DEFAULT_SIZE)
    if fs_type == "xfs" and (required or limit) and size < MIN_SIZE["xfs"]:
        raise OutOfRange(f"{size} bytes requested: {XFS_MIN_MESSAGE}")
    size = max(round_up(size), MIN_SIZE.get(fs_type, MIB), floor)
    if limit and size > limit:
        raise OutOfRange(f"smallest possible size {size} exceeds limit_bytes {limit}")
    if size > max_bytes:
        raise OutOfRange(f"size {size} exceeds the largest volume this backend can provision ({max_bytes})")
    return size


def in_range(size: int, rng: csi_pb2.CapacityRange | None) -> bool:
    if rng is None:
        return True
    return size >= rng.required_bytes and (not rng.limit_bytes or size <= rng.limit_bytes)


def page_token(last_id: str) -> str:
    """A token naming the last id a page returned; the next page starts after it."""
    raw = last_id.encode()
    return f"{base64.urlsafe_b64encode(raw).decode()}.{zlib.crc32(raw):08x}"


def token_start(token: str) -> str:
    """The last id the previous page returned; InvalidToken (ABORTED) for tokens we never handed out."""
    encoded, _, check = token.rpartition(".")
    try:
        raw = base64.urlsafe_b64decode(encoded.encode())
    except (binascii.Error, ValueError) as e:
        raise InvalidToken(f"invalid starting_token {token!r}") from e
    if not encoded or f"{zlib.crc32(raw):08x}" != check:
        raise InvalidToken(f"invalid starting_token {token!r}")
    return raw.decode()


def paginate(ids: Sequence[str], max_entries: int, starting_token: str) -> tuple[int, int, str]:
    """Slice bounds [start, end) into sorted `ids` and the next token ("" on the last page).

    The token is the last id returned (a cursor, not an offset): the next page starts at the
    first id after it in the current listing, so entries added or removed between pages
    neither repeat nor shift what follows (those added behind the cursor are not seen).
    """
    if max_entries < 0:
        raise InvalidArgument("max_entries must not be negative")
    start = 0
    if starting_token:
        start = bisect.bisect_right(ids, token_start(starting_token))
    end = len(ids) if max_entries == 0 else min(len(ids), start + max_entries)
    return start, end, page_token(ids[end - 1]) if end < len(ids) else ""
