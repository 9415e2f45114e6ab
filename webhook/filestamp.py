"""A cheap fingerprint of files, to reload them when they change.

Inode, mtime and size: Kubernetes updates mounted Secrets and ConfigMaps by swapping a
symlink to a new directory, which changes the inode even when mtime and size look alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

Stamp = tuple[tuple[int, int, int], ...]


def file_stamp(paths: Iterable[Path]) -> Stamp:
    out = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:  # missing for now: a later appearance is a change
            out.append((0, 0, 0))
    return tuple(out)
