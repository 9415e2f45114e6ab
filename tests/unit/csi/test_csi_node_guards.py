"""The node plugin's guards without a driver: the mount-flag allow-list, kubelet-dir confinement and
the device identity check (against a fake sysfs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi import mount_flags
from csi.backends import device_identity
from csi.errors import FailedPrecondition, InvalidArgument
from csi.node_paths import KubeletPaths


@pytest.mark.parametrize("flags", [("noatime", "nodev"), ("ro", "data=journal", "commit=30"), ()])
def test_allowed_flags_pass(flags: tuple[str, ...]) -> None:
    assert mount_flags.check(flags) == flags


@pytest.mark.parametrize(
    "flag",
    ["bind", "rbind", "remount", "move", "noatime,bind", "suid", "dev", "exec", "errors=panic",
     "data=ordered,bind", "x-systemd.automount", "context=system_u", "commit=1 2", "", "loop",
     "password=hunter2"],
)  # fmt: skip
def test_refused_flags(flag: str) -> None:
    with pytest.raises(InvalidArgument, match="mount flag 2 of 2") as e:
        mount_flags.check(["noatime", flag])
    assert repr(flag) not in str(e.value) and "hunter2" not in str(e.value)  # flags may carry secrets


def test_paths_are_confined_after_resolving_symlinks(tmp_path: Path) -> None:
    kubelet = tmp_path / "kubelet"
    (kubelet / "pods").mkdir(parents=True)
    (kubelet / "escape").symlink_to("/etc")
    paths = KubeletPaths.of([str(kubelet)])
    assert paths.confine("target_path", str(kubelet / "pods/x/mount")) == str(kubelet / "pods/x/mount")
    for bad in ("/etc/x", str(kubelet), str(kubelet / "escape/x"), str(kubelet / "../outside"), "rel/x"):
        with pytest.raises(InvalidArgument):
            paths.confine("target_path", bad)
    with pytest.raises(InvalidArgument):
        KubeletPaths.of([str(tmp_path / "kubeletx")]).confine("p", str(tmp_path / "kubelet/pods"))


def test_identity_by_serial_by_id_or_loop_backing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sys_block, by_id = tmp_path / "sys", tmp_path / "by-id"
    for name in ("vdb", "loop7", "sda"):
        (sys_block / name).mkdir(parents=True)
    (sys_block / "vdb" / "serial").write_text("vol-1\n")
    (sys_block / "loop7" / "loop").mkdir()
    (sys_block / "loop7" / "loop" / "backing_file").write_text("/srv/ls/vol-2.img\n")
    by_id.mkdir()
    (by_id / "scsi-0LIGHTNINGSTOR_vol-3").symlink_to("/dev/sda")
    monkeypatch.setattr(device_identity, "SYS_BLOCK", sys_block)
    monkeypatch.setattr(device_identity, "BY_ID", by_id)
    assert device_identity.names_volume("/dev/vdb", "vol-1")
    assert device_identity.names_volume("/dev/loop7", "vol-2")
    assert device_identity.names_volume("/dev/sda", "vol-3")
    assert not device_identity.names_volume("/dev/loop7", "vol-1")  # another volume's loop device
    assert not device_identity.names_volume("/dev/sda", "vol-1")  # a host disk
    assert not device_identity.names_volume("/dev/vdb", "vol-")  # no prefix match


def test_a_missing_or_foreign_device_is_a_failed_precondition() -> None:
    with pytest.raises(FailedPrecondition, match="not attached"):
        device_identity.volume_device("vol-1", "")
    with pytest.raises(FailedPrecondition, match="not a block device"):
        device_identity.volume_device("vol-1", "/etc/passwd")
