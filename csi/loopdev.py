"""Loop devices backed by volume files: found through sysfs, attached and detached with losetup."""

from __future__ import annotations

import os
import time
from pathlib import Path

from csi.commands import run
from csi.errors import OperationPending

SYS_BLOCK = Path("/sys/block")
LOOP_PARAMS = Path("/sys/module/loop/parameters")
MINORBITS = 20


def find(backing_file: Path) -> list[str]:
    """Every loop device currently backed by `backing_file` (read from sysfs, no subprocess), but
    for those detached already and waiting for their last user to close them (see leaving())."""
    return sorted(dev for dev, gone in _backing(backing_file).items() if not gone)


def leaving(backing_file: Path) -> list[str]:
    """Loop devices of `backing_file` detached while another user still held them open: the kernel
    only set autoclear and takes them away at that user's close. Seen when a container being
    created copied the staging mount into its mount namespace just before the unstage."""
    return sorted(dev for dev, gone in _backing(backing_file).items() if gone)


def _backing(backing_file: Path) -> dict[str, bool]:
    want, out = str(backing_file.resolve()), {}
    for entry in SYS_BLOCK.glob("loop*/loop/backing_file"):
        try:
            backing = entry.read_text().rstrip("\n")
            gone = (entry.parent / "autoclear").read_text().strip() == "1"
        except OSError:  # detached between glob and read
            continue
        if backing == want:
            out[f"/dev/{entry.parent.parent.name}"] = gone
    return out


def backed_by_dir(directory: Path, *, leaving: bool = True) -> dict[str, str]:
    """loop device -> backing file, for every loop device whose file lives under `directory`
    (`leaving=False`: but for those already detached, see find())."""
    prefix = str(directory.resolve()).rstrip("/") + "/"
    out = {}
    for entry in SYS_BLOCK.glob("loop*/loop/backing_file"):
        try:
            backing = entry.read_text().rstrip("\n").removesuffix(" (deleted)")
            gone = (entry.parent / "autoclear").read_text().strip() == "1"
        except OSError:
            continue
        if backing.startswith(prefix) and (leaving or not gone):
            out[f"/dev/{entry.parent.parent.name}"] = backing
    return out


def attach(backing_file: Path, *, readonly: bool = False, settle: float = 5.0) -> str:
    """The loop device of `backing_file`, attaching a new one only if there is none. A device of it
    still leaving (detached, held open elsewhere) is waited for up to `settle` seconds: reusing it
    would lose it at that close, and a second device would put the filesystem on two devices at
    once. Still there: OperationPending (ABORTED), which the CO retries."""
    existing = find(backing_file)
    if existing:
        return existing[0]
    deadline = time.monotonic() + settle
    while held := leaving(backing_file):
        if time.monotonic() > deadline:
            raise OperationPending(f"{', '.join(held)} of {backing_file} detached but still open elsewhere")
        time.sleep(0.05)
    argv = ["losetup", "--find", "--show"]
    if readonly:
        argv.append("--read-only")
    return run([*argv, str(backing_file)]).strip()


def detach(device: str) -> None:
    """Detach; a device still mounted is detached by the kernel when its last user goes (autoclear)."""
    run(["losetup", "--detach", device], ok_codes=(0, 1))


def detach_all(backing_file: Path) -> None:
    for device in find(backing_file):
        detach(device)


def refresh(device: str) -> int:
    """Make the loop device pick up its backing file's new size; returns the device size."""
    run(["losetup", "--set-capacity", device])
    return size(device)


def node_capacity() -> int:
    """How many loop devices this kernel can hold: device minors / minors per loop device.

    loop-control creates devices on demand beyond `max_loop` (seen: /dev/loop40 with
    max_loop=8), so the bound is the minor space: 2**20 >> part_shift, part_shift = fls(max_part).
    """
    try:
        max_part = int((LOOP_PARAMS / "max_part").read_text())
    except (OSError, ValueError):
        max_part = 0
    return (1 << MINORBITS) >> max_part.bit_length()


def size(device: str) -> int:
    name = os.path.basename(os.path.realpath(device))
    return int((SYS_BLOCK / name / "size").read_text()) * 512
