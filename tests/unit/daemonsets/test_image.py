"""The image recipe (Containerfile) provides what the manifests run.

No container engine runs on these machines, so the image is not built here; these tests
check the recipe against the repository and against Debian: every COPY source exists, every
OVS/OVN program the manifests call is shipped by a package the image installs (asked of
dpkg on this Debian machine), and the suite's programs come from the installed package."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
RECIPE = (ROOT / "Containerfile").read_text()
INSTRUCTIONS = re.sub(r"\\\n", " ", RECIPE)


def _apt_packages() -> set[str]:
    install = re.search(r"apt-get install (.*?)(&&|$)", INSTRUCTIONS, re.M)
    assert install, "the Containerfile installs no Debian packages"
    return {w for w in install.group(1).split() if not w.startswith("-")}


@functools.cache
def _containers() -> list[dict[str, Any]]:
    out = []
    for path in sorted((ROOT / "daemonsets").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            pod = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
            out += [
                c
                for c in pod.get("containers", []) + pod.get("initContainers", [])
                if c["image"] == "k8shost"
            ]
    return out


def _programs(container: dict[str, Any]) -> set[str]:
    """OVS/OVN programs and absolute paths a container runs (its command and shell scripts)."""
    words = " ".join([*container.get("command", []), *container.get("args", [])]).split()
    return {w for w in words if w.startswith("/usr/") or re.fullmatch(r"(ovs|ovn)-[a-z-]+", w)}


def test_every_copied_path_exists() -> None:
    for line in INSTRUCTIONS.splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), f"Containerfile copies missing {src}"


def test_every_package_the_suite_imports_is_copied() -> None:
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    copied = {line.split()[1].rstrip("/") for line in INSTRUCTIONS.splitlines() if line.startswith("COPY ")}
    for pattern in include["include"]:
        assert pattern.rstrip("*") in copied, f"package {pattern} is not copied into the image"


def test_ovs_and_ovn_programs_the_manifests_run_come_from_installed_packages() -> None:
    programs = {p for c in _containers() for p in _programs(c)}
    assert {"ovs-vsctl", "ovn-controller", "/usr/share/ovn/scripts/ovn-ctl"} <= programs
    paths = {}
    for program in programs:
        path = program if program.startswith("/") else shutil.which(program)
        assert path, f"{program} is not on this machine (make setup installs the same packages)"
        paths[path] = program
    owners = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True, check=True).stdout
    shipped = {line.split(": ", 1)[1]: line.split(":")[0] for line in owners.splitlines()}
    packages = _apt_packages()
    for path, program in paths.items():
        assert path in shipped, f"no Debian package ships {path}"
        assert shipped[path] in packages, f"{program} comes from {shipped[path]}, not installed by the image"


def test_suite_programs_come_from_the_installed_package() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "pip install --no-cache-dir ." in INSTRUCTIONS and "PATH=/app/.venv/bin" in INSTRUCTIONS
    commands = {c["command"][0] for c in _containers() if c.get("command")}
    assert {"prismnet-agent", "lightningstor-csi", "iam-webhook"} <= commands
    assert {c for c in commands if not c.startswith("/")} <= set(scripts)


def test_shim_sources_the_cni_installer_copies_are_in_the_image() -> None:
    from cni.install import SHIM_MODULES

    installer = next(c for c in _containers() if c["name"] == "install-cni")
    assert installer["command"] == ["prismnet-install"]
    for src in SHIM_MODULES:
        assert (ROOT / "cni" / src).exists() and "COPY cni/ cni/" in INSTRUCTIONS, src
