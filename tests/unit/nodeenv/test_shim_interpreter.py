"""The installed `prismnet` runs on the system Python 3.11+ when there is one, else on ours."""

from __future__ import annotations

import sys
from pathlib import Path

from nodeenv.cni_component import shim_interpreter


def _fake_python(tmp_path: Path, answer: str) -> str:
    exe = tmp_path / "python3"
    exe.write_text(f"#!/bin/sh\necho {answer}\n")
    exe.chmod(0o755)
    return str(exe)


def test_a_311_interpreter_is_chosen(tmp_path: Path) -> None:
    fake = _fake_python(tmp_path, "True")
    assert shim_interpreter(fake) == fake


def test_an_older_interpreter_falls_back_to_ours(tmp_path: Path) -> None:
    assert shim_interpreter(_fake_python(tmp_path, "False")) == sys.executable


def test_a_missing_interpreter_falls_back_to_ours(tmp_path: Path) -> None:
    assert shim_interpreter(str(tmp_path / "nope")) == sys.executable


def test_this_interpreter_qualifies() -> None:
    assert shim_interpreter(sys.executable) == sys.executable
