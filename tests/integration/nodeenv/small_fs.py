"""A small filesystem of its own for a database directory (a loop device, ext4), and filling it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path


def loop_fs(tmp: Path, name: str, mb: int) -> Iterator[Path]:
    """An `mb` MB ext4 filesystem (no blocks reserved for root) on a loop device, mounted at
    `tmp/name` while the generator runs; unmounted and detached after."""
    image, mnt = tmp / f"{name}.img", tmp / name
    mnt.mkdir()
    subprocess.run(["truncate", "-s", f"{mb}M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    try:
        subprocess.run(["mount", device, str(mnt)], check=True)
        try:
            yield mnt
        finally:
            subprocess.run(["umount", str(mnt)], check=True)
    finally:
        subprocess.run(["losetup", "-d", device], check=True)
        image.unlink()


def fill(directory: Path) -> Path:
    """Write zeros into `directory` until the filesystem refuses (ENOSPC), in ever smaller writes
    down to one byte, so no free block is left; the filler file."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler
