"""Which mount flags the Node service passes to mount(8) (`volume_capability.mount.mount_flags`, from a
PersistentVolume's mountOptions or a StorageClass's): an allow-list, checked where they are used
(NodeStageVolume, NodePublishVolume); the Controller service never mounts and does not check them.

Allowed: the VFS flags that only restrict or tune (ro, noatime, nosuid, nodev, noexec, sync,
discard, ...) and a few ext4/xfs options that change nothing outside the volume. Refused with
INVALID_ARGUMENT: everything else, among them `bind`/`rbind`/`remount`/`move` (they would make
mount(8) act on another path), `suid`/`dev`/`exec` (they undo the node's restrictions), SELinux
contexts, `x-*` helper options, and any flag carrying a comma (mount(8) would split it into more
options) or whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from csi.errors import InvalidArgument

FLAGS = frozenset(
    {
        "ro", "rw", "noatime", "nodiratime", "relatime", "strictatime", "lazytime", "nolazytime",
        "nosuid", "nodev", "noexec", "sync", "async", "dirsync", "discard", "nodiscard",
        "nouuid", "barrier", "nobarrier", "noquota", "usrquota", "grpquota", "prjquota",
        "inode64", "noinode64", "largeio", "nolargeio", "user_xattr", "nouser_xattr", "acl", "noacl",
    }
)  # fmt: skip
"""Flags without a value."""
VALUED = {
    "data": re.compile(r"ordered|writeback|journal"),
    "commit": re.compile(r"\d{1,4}"),
    "errors": re.compile(r"remount-ro|continue"),
    "logbufs": re.compile(r"\d{1}"),
    "logbsize": re.compile(r"\d{1,6}[kK]?"),
    "allocsize": re.compile(r"\d{1,10}[kKmMgG]?"),
}
"""key=value options and the values they may take (whole-value match)."""


def check(flags: Iterable[str]) -> tuple[str, ...]:
    """The flags unchanged, or InvalidArgument giving the position of the first one refused (never
    its text: the CSI spec warns mount flags may carry secrets)."""
    out = tuple(flags)
    for i, flag in enumerate(out, 1):
        key, eq, value = flag.partition("=")
        pattern = VALUED.get(key)
        ok = (flag in FLAGS) if not eq else (pattern is not None and pattern.fullmatch(value) is not None)
        if not ok:
            raise InvalidArgument(
                f"mount flag {i} of {len(out)} is not allowed (allowed: {', '.join(sorted(FLAGS))}, "
                f"and {', '.join(f'{k}=' for k in VALUED)} with safe values)"
            )
    return out
