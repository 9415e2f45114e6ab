"""Releasing everything the driver set up under one directory: mounts first, then loop devices.

Used by the node environment's cleanup and by tests; it only touches mounts whose
mount point, and loop devices whose backing file, lie under the given directory (and
the I/O limits of those loop devices, cleared before detaching: the number is reused).
"""

from __future__ import annotations

import logging
from pathlib import Path

from csi import iothrottle, loopdev, mounts
from csi.errors import FailedPrecondition

log = logging.getLogger(__name__)


def release_under(root: Path) -> list[str]:
    """Unmount every mount below `root` (deepest first), detach loop devices backed by files below it."""
    prefix = str(root.resolve()).rstrip("/") + "/"
    released = []
    below = [e.mount_point for e in mounts.mount_table() if e.mount_point.startswith(prefix)]
    for mount_point in sorted(set(below), key=len, reverse=True):
        mounts.unmount(mount_point)
        released.append(f"umount {mount_point}")
    throttle = iothrottle.detect("auto")
    for device, backing in loopdev.backed_by_dir(root).items():
        if throttle is not None:
            try:
                throttle.clear(device)
            except (FailedPrecondition, OSError):
                log.warning("could not clear the I/O limits of %s", device)
        loopdev.detach(device)
        released.append(f"losetup -d {device} ({backing})")
    if released:
        log.info("released %d mounts/loop devices under %s", len(released), root)
    return released
