"""The layering the webhook promises: the decision never imports the HTTP edge."""

from __future__ import annotations

import ast
from pathlib import Path

import webhook

PURE = ("review", "tokens", "mapping", "cache", "wire", "errors")
EDGE_ONLY = {"aiohttp": {"app", "server", "keys"}, "prometheus_client": {"app", "metrics"}}


def imports(module: str) -> set[str]:
    tree = ast.parse((Path(webhook.__file__).parent / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_pure_modules_never_import_aiohttp_or_prometheus() -> None:
    for module in PURE:
        assert not imports(module) & {"aiohttp", "prometheus_client", "ssl"}, module


def test_edge_libraries_stay_at_the_edge() -> None:
    for path in Path(webhook.__file__).parent.glob("*.py"):
        for lib, allowed in EDGE_ONLY.items():
            if lib in imports(path.stem):
                assert path.stem in allowed, f"{path.stem} imports {lib}"


def test_only_settings_reads_the_environment() -> None:
    for path in Path(webhook.__file__).parent.glob("*.py"):
        text = path.read_text()
        if path.stem not in ("settings", "main"):
            assert "os.environ" not in text and "sys.argv" not in text, path.stem
