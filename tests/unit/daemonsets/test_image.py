"""The image recipe (Containerfile) provides what the manifests run.

No container engine runs on these machines, so the image is not built here; these tests
check the recipe against the repository and against Debian: every COPY source exists, every
OVS/OVN program the manifests call (commands, scripts, exec probes) and every program the suite's
code executes (mount, mkfs, losetup, iptables, ...) is shipped by a package the image installs
(asked of dpkg on this Debian machine), and the suite's programs come from the installed package."""

from __future__ import annotations

import functools
import os
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
    """OVS/OVN programs and absolute paths a container runs (its command, shell scripts and exec probes)."""
    probes = [
        container.get(p, {}).get("exec", {}).get("command", []) for p in ("livenessProbe", "readinessProbe")
    ]
    argv = [*container.get("command", []), *container.get("args", []), *(w for p in probes for w in p)]
    words = " ".join(argv).split()
    return {
        w for w in words if w.startswith(("/usr/", "/bin/")) or re.fullmatch(r"(ovs|ovn|ovsdb)-[a-z-]+", w)
    }


def _owners(paths: list[str]) -> dict[str, str]:
    """path -> the Debian package shipping it (dpkg on this machine), through usrmerge's /bin -> /usr/bin
    and alternatives' symlinks."""
    out = {}
    for path in paths:
        real = os.path.realpath(path)
        candidates = {path, real, *(p.removeprefix("/usr") for p in (path, real) if p.startswith("/usr/"))}
        found = subprocess.run(["dpkg", "-S", *sorted(candidates)], capture_output=True, text=True).stdout
        owners = [
            line.split(":")[0] for line in found.splitlines() if ": " in line and "diversion" not in line
        ]
        if owners:
            out[path] = owners[0]
    return out


def _essential() -> set[str]:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Essential}\\n"], capture_output=True, text=True
    )
    return {line.split()[0] for line in out.stdout.splitlines() if line.endswith(" yes")}


def _in_image(programs: set[str]) -> list[str]:
    """The programs no package the image installs (or Debian's Essential set) ships."""
    paths = {}
    for program in programs:
        path = program if program.startswith("/") else shutil.which(program)
        assert path, f"{program} is not on this machine (make setup installs the same packages)"
        paths[path] = program
    shipped = _owners(list(paths))
    packages = _apt_packages() | _essential()
    return sorted(f"{p} ({shipped.get(path, 'no package')})" for path, p in paths.items()
                  if shipped.get(path) not in packages)  # fmt: skip


# Programs the suite's Python code executes (module: programs); each must be shipped in the image.
CODE_RUNS = {
    "csi/loopdev.py": {"losetup"},
    "csi/backends/local_groups.py": {"cp"},
    "csi/mounts.py": {
        "mount",
        "umount",
        "fsfreeze",
        "mkfs.ext4",
        "mkfs.xfs",
        "blkid",
        "resize2fs",
        "xfs_growfs",
        "e2fsck",
    },
    "cni/management.py": {"iptables"},
}


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
    assert {
        "ovs-vsctl",
        "ovn-controller",
        "/usr/share/ovn/scripts/ovn-ctl",
        "/usr/bin/ovn-northd",
    } <= programs
    assert _in_image(programs) == []


def test_programs_the_suite_code_runs_are_in_the_image() -> None:
    for module, programs in CODE_RUNS.items():
        source = (ROOT / module).read_text()
        for program in programs:
            assert f'"{program}"' in source, f"{module} no longer runs {program}: update CODE_RUNS"
    assert _in_image(set().union(*CODE_RUNS.values())) == []


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
