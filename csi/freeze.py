"""Crash-consistent copies: every mounted filesystem on the given volume files frozen together.

`frozen(files)` freezes each filesystem mounted from a loop device of one of `files`
(once per filesystem, in a fixed order), yields, and thaws every one it froze, also
when freezing a later one or the copy in between fails. With all members frozen at
once, copies taken inside the block are one point in time across the volumes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from csi import loopdev, mounts

log = logging.getLogger(__name__)


def mount_points(files: Iterable[Path]) -> list[str]:
    """The mount point to freeze for each filesystem mounted from one of `files` (first mount of each)."""
    points: list[str] = []
    for path in files:
        for device in loopdev.find(path):
            entries = mounts.mounts_of(device)
            if entries and entries[0].mount_point not in points:
                points.append(entries[0].mount_point)
    return points


@contextmanager
def frozen(files: Iterable[Path]) -> Iterator[list[str]]:
    """Freeze all filesystems on `files` for the block's duration; thawing is guaranteed."""
    done: list[str] = []
    try:
        for point in mount_points(files):
            mounts.freeze(point)
            done.append(point)
        yield done
    finally:
        failed: list[Exception] = []
        for point in reversed(done):
            try:
                mounts.thaw(point)
            except Exception as e:  # keep thawing the others; the first failure is raised after
                log.exception("thawing %s failed", point)
                failed.append(e)
        if failed:
            raise failed[0]
