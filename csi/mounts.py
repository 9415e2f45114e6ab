"""Mounts, filesystems and device files on this node: the only module that runs mount/mkfs/resize.

Mount state is read from /proc/self/mountinfo (no findmnt subprocess per call).
A device that already carries a filesystem is never formatted again.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from csi.commands import run, run_code
from csi.errors import CommandFailed, FailedPrecondition, InvalidArgument

log = logging.getLogger(__name__)

SUPPORTED_FS = ("ext4", "xfs")
DEFAULT_FS = "ext4"
MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1"],
    "xfs": ["mkfs.xfs", "-q", "-K"],
}


@dataclass(frozen=True, slots=True)
class MountEntry:
    mount_point: str
    root: str
    fstype: str
    source: str
    options: frozenset[str]

    @property
    def readonly(self) -> bool:
        return "ro" in self.options


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_table() -> list[MountEntry]:
    entries = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        entries.append(
            MountEntry(
                mount_point=_unescape(f[4]),
                root=_unescape(f[3]),
                fstype=r[0],
                source=_unescape(r[1]),
                options=frozenset(f[5].split(",")),
            )
        )
    return entries


def find_mount(path: str | Path) -> MountEntry | None:
    """The topmost mount exactly at `path`, or None."""
    target = os.path.realpath(path)
    found = None
    for entry in mount_table():
        if entry.mount_point == target:
            found = entry
    return found


def mounts_at(path: str | Path) -> list[MountEntry]:
    """Every mount stacked exactly at `path`, bottom first."""
    target = os.path.realpath(path)
    return [e for e in mount_table() if e.mount_point == target]


def mounts_of(device: str) -> list[MountEntry]:
    dev = os.path.realpath(device)
    return [e for e in mount_table() if e.source == dev]


def is_device_bind(entry: MountEntry, device: str) -> bool:
    """True when `entry` is the bind mount of block device file `device` (devtmpfs, root /loopN)."""
    return entry.fstype == "devtmpfs" and entry.root == "/" + os.path.basename(os.path.realpath(device))


def mount(source: str, target: str, fs_type: str, options: Sequence[str]) -> None:
    argv = ["mount", "-t", fs_type]
    if options:
        argv += ["-o", ",".join(options)]
    run([*argv, source, target])


def bind_mount(source: str, target: str, *, readonly: bool, options: Sequence[str] = ()) -> None:
    """Bind mount; read-only binds need the second remount step (mount(8) does it for -o ro)."""
    opts = ["bind", *options] + (["ro"] if readonly else [])
    run(["mount", "-o", ",".join(opts), source, target])


def unmount(target: str) -> bool:
    """Unmount every mount stacked at `target`; False if nothing was mounted there."""
    unmounted = False
    while find_mount(target) is not None:
        run(["umount", target])
        unmounted = True
    return unmounted


def filesystem_of(device: str) -> str:
    """The filesystem (or partition table) type on `device`, "" when blank."""
    code, out = run_code(["blkid", "-p", "-o", "export", device])
    if code == 2:  # nothing found: blank
        return ""
    if code != 0:
        raise FailedPrecondition(f"cannot probe {device}: blkid exited {code}")
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values.get("TYPE") or ("partition-table:" + values["PTTYPE"] if "PTTYPE" in values else "unknown")


def ensure_filesystem(device: str, fs_type: str) -> bool:
    """Format `device` with `fs_type` only if it is blank; True if it was formatted."""
    if fs_type not in SUPPORTED_FS:
        raise InvalidArgument(f"fs_type {fs_type!r} not supported (supported: {', '.join(SUPPORTED_FS)})")
    existing = filesystem_of(device)
    if existing == fs_type:
        return False
    if existing:
        raise FailedPrecondition(f"{device} already has {existing}; refusing to format it as {fs_type}")
    log.info("formatting %s as %s", device, fs_type)
    run([*MKFS[fs_type], device])
    return True


def grow_filesystem(device: str, mount_point: str, fs_type: str) -> None:
    """Grow a mounted filesystem to its device's size."""
    if fs_type == "xfs":
        run(["xfs_growfs", "-d", mount_point])
        return
    if not fs_type.startswith("ext"):
        raise FailedPrecondition(f"cannot grow a {fs_type} filesystem online")
    try:
        run(["resize2fs", device])
    except CommandFailed as e:
        if "Permission denied" not in e.stderr:
            raise
        # The kernel's online ext4 resize needs CAP_SYS_RESOURCE, which this process lacks.
        raise FailedPrecondition(
            f"online resize of ext4 on {device} needs CAP_SYS_RESOURCE (run the node plugin privileged); "
            "the filesystem is grown offline at the next NodeStageVolume"
        ) from e


def can_grow_ext4_online() -> bool:
    """Whether this process holds CAP_SYS_RESOURCE, which the kernel's online ext4 resize needs."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 24))
    return False


def ext4_size(device: str) -> int:
    """Size in bytes of the ext2/3/4 filesystem on `device`, read from its superblock."""
    with open(device, "rb") as f:
        f.seek(1024)
        sb = f.read(1024)
    if int.from_bytes(sb[0x38:0x3A], "little") != 0xEF53:
        raise FailedPrecondition(f"{device} has no ext superblock")
    blocks = int.from_bytes(sb[0x4:0x8], "little")
    if int.from_bytes(sb[0x60:0x64], "little") & 0x80:  # INCOMPAT_64BIT
        blocks |= int.from_bytes(sb[0x150:0x154], "little") << 32
    return blocks * (1024 << int.from_bytes(sb[0x18:0x1C], "little"))


def grow_ext4_offline(device: str, device_size: int) -> bool:
    """Before mounting: grow an ext4 filesystem that is at least 1 MiB smaller than its device."""
    if device_size - ext4_size(device) < 1 << 20:
        return False
    log.info("growing ext4 on %s offline to %d bytes", device, device_size)
    run(["e2fsck", "-f", "-p", device], ok_codes=(0, 1))
    run(["resize2fs", device])
    return True


def freeze(mount_point: str) -> None:
    run(["fsfreeze", "--freeze", mount_point])


def thaw(mount_point: str) -> None:
    run(["fsfreeze", "--unfreeze", mount_point], ok_codes=(0, 1))


def is_block_device(path: str | Path) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def ensure_dir(path: str) -> None:
    os.makedirs(path, mode=0o750, exist_ok=True)


def ensure_file(path: str) -> None:
    """An empty regular file to bind a block device onto (its parent created as needed)."""
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    if not os.path.lexists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o640))


def remove_path(path: str) -> None:
    """Remove a target path we created (empty dir or placeholder file); absent is fine."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno != errno.ENOTEMPTY:
            raise
        raise FailedPrecondition(f"{path} still holds files after unmount; not deleting them") from e
