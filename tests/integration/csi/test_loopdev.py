"""csi.loopdev against real loop devices (root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from csi import loopdev
from csi.errors import OperationPending
from tests.integration.csi.conftest import loops_under


def test_a_volume_whose_detached_device_is_still_held_is_not_attached_twice(tmp_path: Path) -> None:
    """A device detached while another user holds it open (the kernel only sets autoclear) goes
    away at that close: reusing it would lose the device under a new stage, and attaching a second
    one would put the filesystem on two devices at once. attach() waits, then answers ABORTED."""
    backing = tmp_path / "vol.img"
    with backing.open("wb") as f:
        f.truncate(16 * 1024 * 1024)
    first = loopdev.attach(backing)
    holder = os.open(first, os.O_RDONLY)
    try:
        loopdev.detach(first)
        autoclear = Path(f"/sys/block/{Path(first).name}/loop/autoclear").read_text().strip()
        assert autoclear == "1", "the kernel detached a device that was still open"
        assert loopdev.find(backing) == [] and loopdev.leaving(backing) == [first]
        with pytest.raises(OperationPending, match="still open elsewhere"):
            loopdev.attach(backing, settle=0.3)
        assert loopdev.find(backing) == []
    finally:
        os.close(holder)
    second = loopdev.attach(backing)  # the holder gone, the device went with it
    try:
        assert loopdev.find(backing) == [second] and loopdev.leaving(backing) == []
    finally:
        loopdev.detach(second)
    assert loops_under(tmp_path) == []
