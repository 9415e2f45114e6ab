"""Which block device on this node is a LightningStor volume's: found from the volume's own
identity, never taken from `publish_context.device_path` (whoever can write a VolumeAttachment's
status or answer as the VolumeService could otherwise name a host disk, or another volume's device).

A device is the volume's when one of these names it by the volume id:
- a `/dev/disk/by-id/` link whose name ends in `-<volume id>` or `_<volume id>` (udev's names for
  the serial an NBD/iSCSI/virtio attachment carries),
- the device's `serial` in sysfs (`/sys/class/block/<dev>/serial`, virtio-blk),
- for a loop device (the VolumeService of `make sandbox`/`make boot` and the tests attaches loop
  devices), its backing file `<volume id>.img`.
`device_path` stays a hint: it must name that same device, else FAILED_PRECONDITION.
"""

from __future__ import annotations

import os
from pathlib import Path

from csi import mounts
from csi.errors import FailedPrecondition

BY_ID = Path("/dev/disk/by-id")
SYS_BLOCK = Path("/sys/class/block")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def names_volume(device: str, volume_id: str) -> bool:
    """True when block device `device` (a /dev path) carries `volume_id` as its identity."""
    name = os.path.basename(os.path.realpath(device))
    sys = SYS_BLOCK / name
    if _read(sys / "serial") == volume_id:
        return True
    backing = _read(sys / "loop" / "backing_file").removesuffix(" (deleted)")
    if backing and os.path.basename(backing) == f"{volume_id}.img":
        return True
    return os.path.realpath(device) in _by_id(volume_id)


def _by_id(volume_id: str) -> set[str]:
    try:
        links = list(BY_ID.iterdir())
    except OSError:
        return set()
    return {
        os.path.realpath(link)
        for link in links
        if link.name.endswith((f"-{volume_id}", f"_{volume_id}")) and "-part" not in link.name
    }


def volume_device(volume_id: str, hint: str) -> str:
    """The volume's block device: `hint` (publish_context's device_path) when it is a block device
    carrying the volume's identity, else FAILED_PRECONDITION (nothing is mounted or formatted)."""
    if not hint:
        raise FailedPrecondition(f"volume {volume_id} is not attached: publish_context has no device_path")
    if not mounts.is_block_device(hint):
        raise FailedPrecondition(f"device {hint} of volume {volume_id} is not a block device on this node")
    if not names_volume(hint, volume_id):
        raise FailedPrecondition(
            f"device {hint} is not volume {volume_id}'s (neither its serial, /dev/disk/by-id name nor "
            "loop backing file names the volume): refusing to mount or format it"
        )
    return os.path.realpath(hint)
