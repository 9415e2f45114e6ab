"""K8SHOST_OVN_TREE: the tree's wrappers first in PATH, its schemas used, a bad tree refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError


def test_unset_keeps_debian_tools_and_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ovn_tree.ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    ovn_tree.activate()
    assert ovn_tree.share("ovn/ovn-nb.ovsschema") == Path("/usr/share/ovn/ovn-nb.ovsschema")
    assert ovn_tree.tree() is None and os.environ["PATH"] == "/usr/bin:/bin"


def test_tree_goes_first_in_path_once_and_gives_its_schemas(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ovn-northd").write_text("#!/bin/sh\n")
    monkeypatch.setenv(ovn_tree.ENV_VAR, str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    ovn_tree.activate()
    ovn_tree.activate()
    assert os.environ["PATH"] == f"{tmp_path}/bin:/usr/bin:/bin"
    assert ovn_tree.share("ovn/ovn-sb.ovsschema") == tmp_path / "root/usr/share/ovn/ovn-sb.ovsschema"


def test_a_tree_without_tools_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ovn_tree.ENV_VAR, str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(DaemonError, match=r"scripts/ovn-trixie\.sh"):
        ovn_tree.activate()
    assert os.environ["PATH"] == "/usr/bin:/bin"
