"""Every program the package declares exists and answers --help (operators start there)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

SCRIPTS = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())["project"][
    "scripts"
]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_entry_point_resolves_and_answers_help(name: str) -> None:
    module, _, func = SCRIPTS[name].partition(":")
    assert callable(getattr(importlib.import_module(module), func))
    if name == "prismnet":  # the CNI executable speaks the CNI protocol, not argv: VERSION instead
        argv, env = [sys.executable, "-m", module], {"CNI_COMMAND": "VERSION", "PATH": "/usr/bin:/bin"}
        out = subprocess.run(argv, env=env, input=b"", capture_output=True, timeout=60, check=True)
        assert b"supportedVersions" in out.stdout
        return
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout
