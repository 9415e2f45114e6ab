"""The manifests a cluster admin applies: every file is valid, referenced and consistent
with the programs and the k3s flags the spec asks for."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DS = ROOT / "daemonsets"
# Everything a cluster admin applies; k3s/ holds host files, overlays/ only kustomizations.
MANIFESTS = sorted(p for p in DS.rglob("*.yaml") if p.relative_to(DS).parts[0] not in ("k3s", "overlays"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _kustomize_files(kdir: Path) -> set[Path]:
    """Every manifest file a kustomization pulls in, following bases recursively."""
    k = _docs(kdir / "kustomization.yaml")[0]
    files: set[Path] = set()
    for res in k.get("resources", []):
        target = (kdir / res).resolve()
        assert target.exists(), f"{kdir}/kustomization.yaml names missing resource {res}"
        files |= _kustomize_files(target) if target.is_dir() else {target}
    return files


def test_overlay_pulls_in_every_manifest_file() -> None:
    included = _kustomize_files(DS / "overlays" / "k3s")
    # monitoring/ is applied on its own, by those who run prometheus-operator (its CRDs)
    manifests = {
        p.resolve() for p in MANIFESTS if p.name != "kustomization.yaml" and "monitoring" not in p.parts
    }
    assert manifests - included == set(), "manifests not referenced by any kustomization"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DS)))
def test_every_object_is_well_formed(path: Path) -> None:
    for doc in _docs(path):
        assert doc.get("apiVersion") and doc.get("kind"), path
        if doc["kind"] == "Kustomization":
            continue
        assert doc["metadata"].get("name"), path
        spec = doc.get("spec", {})
        if doc["kind"] in ("Deployment", "DaemonSet", "StatefulSet"):
            labels = spec["template"]["metadata"]["labels"]
            assert spec["selector"]["matchLabels"].items() <= labels.items(), "selector must match template"
            names = [c["name"] for c in spec["template"]["spec"]["containers"]]
            assert len(names) == len(set(names)), "duplicate container names"


def test_suite_entry_points_used_by_manifests_exist() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for path in MANIFESTS:
        for doc in _docs(path):
            pod = doc.get("spec", {}).get("template", {}).get("spec", {})
            for c in pod.get("containers", []) + pod.get("initContainers", []):
                exe = (c.get("command") or [""])[0]
                if exe and "/" not in exe:
                    assert exe in scripts, f"{path.name}: {c['name']} runs unknown program {exe}"
