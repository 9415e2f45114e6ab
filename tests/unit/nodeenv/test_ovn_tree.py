"""The OVN tree (build/ovn-trixie, `make ovs`): the only OVN/OVS the node environment runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodeenv import ovn_tree, vswitchd
from nodeenv.daemons import DaemonError

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "ovn-trixie.sh"


def fake_tree(root: Path, vswitchd_version: str = "3.5.0") -> Path:
    """A made tree's marks, its ovs-vswitchd a script saying `vswitchd_version`."""
    (root / "bin").mkdir(parents=True)
    (root / "TREE.txt").write_text("ovn-northd 25.03.0\n")
    for name, says in (
        ("ovn-northd", "ovn-northd 25.03.0"),
        ("ovsdb-server", "ovsdb-server (Open vSwitch) 3.5.0"),
        ("ovs-vswitchd", f"ovs-vswitchd (Open vSwitch) {vswitchd_version}"),
    ):
        (root / "bin" / name).write_text(f"#!/bin/sh\necho '{says}'\n")
        (root / "bin" / name).chmod(0o755)
    return root


def test_the_tree_is_the_checkouts_build_ovn_trixie() -> None:
    assert Path(__file__).resolve().parents[3] / "build" / "ovn-trixie" == ovn_tree.TREE
    assert ovn_tree.share("ovn/ovn-nb.ovsschema") == ovn_tree.TREE / "root/usr/share/ovn/ovn-nb.ovsschema"


def test_a_tree_not_made_is_refused_naming_make_ovs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ovn_tree, "TREE", tmp_path / "nothing")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(DaemonError, match=r"is not made .*run `make ovs`"):
        ovn_tree.activate()
    with pytest.raises(DaemonError, match=r"`make ovs`"):
        vswitchd.choose_vswitchd()
    ovn_tree.activate(required=False)  # the tear-down commands: nothing changes, no fallback either
    assert os.environ["PATH"] == "/usr/bin:/bin"


def test_a_half_made_tree_is_not_made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (fake_tree(tmp_path / "t") / "TREE.txt").unlink()  # the script writes it last, after its checks
    monkeypatch.setattr(ovn_tree, "TREE", tmp_path / "t")
    assert "no TREE.txt" in ovn_tree.missing()


def test_activate_puts_the_trees_bin_first_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ovn_tree, "TREE", fake_tree(tmp_path / "t"))
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin")
    ovn_tree.activate()
    ovn_tree.activate()
    assert os.environ["PATH"] == f"{tmp_path}/t/bin:/usr/sbin:/usr/bin"
    assert ovn_tree.in_tree(tmp_path / "t" / "bin" / "ovn-northd")
    assert not ovn_tree.in_tree("/usr/bin/ovn-northd")


def test_vswitchd_is_the_trees_with_the_trees_schema(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ovn_tree, "TREE", fake_tree(tmp_path / "t"))
    chosen = vswitchd.choose_vswitchd()
    assert chosen.binary == tmp_path / "t/bin/ovs-vswitchd" and chosen.version == "3.5.0"
    assert chosen.schema == tmp_path / "t/root/usr/share/openvswitch/vswitch.ovsschema"


def test_script_check_refuses_a_program_of_another_version(tmp_path: Path) -> None:
    """scripts/ovn-trixie.sh's last step: a host binary copied by mistake (Debian 12's 3.1.0
    ovs-vswitchd through an alternatives symlink) fails the tree."""
    bad = subprocess.run(["bash", str(SCRIPT), "--check", str(fake_tree(tmp_path / "bad", "3.1.0") / "bin")],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 1
    assert "ovs-vswitchd --version says 'ovs-vswitchd (Open vSwitch) 3.1.0', not 3.5.x" in bad.stderr
    assert "ovn-northd" not in bad.stderr and "ovsdb-server" not in bad.stderr
    good = subprocess.run(["bash", str(SCRIPT), "--check", str(fake_tree(tmp_path / "good") / "bin")],
                          capture_output=True, text=True)  # fmt: skip
    assert good.returncode == 0, good.stderr
