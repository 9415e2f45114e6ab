"""Loop devices backed by volume files: found through sysfs, attached and detached with losetup."""

from __future__ import annotations

import os
from pathlib import Path

from csi.commands import run

SYS_BLOCK = Path("/sys/block")
LOOP_PARAMS = Path("/sys/module/loop/parameters")
MINORBITS = 20


def find(backing_file: Path) -> list[str]:
    """Every loop device currently backed by `backing_file` (read from sysfs, no subprocess)."""
    want = str(backing_file.resolve())
    found = []
    for entry in SYS_BLOCK.glob("loop*/loop/backing_file"):
        try:
            backing = entry.read_text().rstrip("\n")
        except OSError:  # detached between glob and read
            continue
        if backing == want:
            found.append(f"/dev/{entry.parent.parent.name}")
    return sorted(found)


def backed_by_dir(directory: Path) -> dict[str, str]:
    """loop device -> backing file, for every loop device whose file lives under `directory`."""
    prefix = str(directory.resolve()).rstrip("/") + "/"
    out = {}
    for entry in SYS_BLOCK.glob("loop*/loop/backing_file"):
        try:
            backing = entry.read_text().rstrip("\n").removesuffix(" (deleted)")
        except OSError:
            continue
        if backing.startswith(prefix):
            out[f"/dev/{entry.parent.parent.name}"] = backing
    return out


def attach(backing_file: Path, *, readonly: bool = False) -> str:
    """The loop device of `backing_file`, attaching a new one only if there is none."""
    existing = find(backing_file)
    if existing:
        return existing[0]
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
