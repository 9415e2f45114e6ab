"""The image recipe (Containerfile) provides what the manifests run.

These tests read the recipe (tests/image/ builds it with `make test-image` and starts containers
from it): every COPY source exists, every OVS/OVN program the manifests call (commands, scripts,
exec probes) and every program the suite's code executes (mount, mkfs, losetup, iptables, ...) is
shipped by a package the image's final stage installs (asked of dpkg on this Debian machine), the
suite's programs come from the installed package, and the build stage's tools stay behind."""

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
# The stages, each from its FROM line on: `build` (left behind) and the image itself (the last one).
STAGES = re.split(r"^(?=FROM )", INSTRUCTIONS, flags=re.M)[1:]
BUILD, FINAL = STAGES[0], STAGES[-1]
BUILD_ONLY = {"python3-venv", "python3-pip", "python3-dev", "gcc", "build-essential", "git"}


def _apt_packages(stage: str = FINAL) -> set[str]:
    install = re.search(r"apt-get install (.*?)(&&|$)", stage, re.M)
    assert install, "the stage installs no Debian packages"
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


def programs_run(container: dict[str, Any]) -> set[str]:
    """OVS/OVN programs and absolute paths a container runs (its command, shell scripts and exec probes)."""
    probes = [
        container.get(p, {}).get("exec", {}).get("command", []) for p in ("livenessProbe", "readinessProbe")
    ]
    argv = [*container.get("command", []), *container.get("args", []), *(w for p in probes for w in p)]
    words = " ".join(argv).split()
    suite = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]  # ovn-central-exporter
    return {
        w
        for w in words
        if w not in suite
        and (w.startswith(("/usr/", "/bin/")) or re.fullmatch(r"(ovs|ovn|ovsdb)-[a-z-]+", w))
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
        # the system's directories, as in the image (not the OVN tree's bin/ a test session puts first)
        path = (
            program
            if program.startswith("/")
            else shutil.which(program, path="/usr/sbin:/usr/bin:/sbin:/bin")
        )
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
        if line.startswith("COPY ") and "--from=" not in line:
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), f"Containerfile copies missing {src}"


def test_every_package_the_suite_imports_is_copied() -> None:
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    copied = {line.split()[1].rstrip("/") for line in BUILD.splitlines() if line.startswith("COPY ")}
    for pattern in include["include"]:
        assert pattern.rstrip("*") in copied, f"package {pattern} is not copied into the image"


def test_ovs_and_ovn_programs_the_manifests_run_come_from_installed_packages() -> None:
    programs = {p for c in _containers() for p in programs_run(c)}
    assert {
        "ovs-vsctl",
        "ovn-controller",
        "ovsdb-tool",  # ovn-central's RAFT members: create-cluster / join-cluster, then ovsdb-server
        "ovsdb-server",
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
    # the suite's wheel, installed for /app/.venv under /staging; the image copies the venv and that tree
    assert "pip wheel --no-deps" in BUILD and "--python /app/.venv/bin/python install" in BUILD
    assert "--root /staging" in BUILD and "PATH=/app/.venv/bin" in FINAL
    copies = [line.split()[1:] for line in FINAL.splitlines() if line.startswith("COPY ")]
    assert copies[:2] == [["--from=build", "/app/.venv/", "/app/.venv/"], ["--from=build", "/staging/", "/"]]
    commands = {c["command"][0] for c in _containers() if c.get("command")}
    assert {"prismnet-agent", "lightningstor-csi", "iam-webhook"} <= commands
    assert {c for c in commands if not c.startswith("/")} <= set(scripts)


def test_shim_sources_the_cni_installer_copies_are_in_the_image() -> None:
    from cni.install import SHIM_MODULES

    installer = next(c for c in _containers() if c["name"] == "install-cni")
    assert installer["command"] == ["prismnet-install"]
    for src in SHIM_MODULES:
        assert (ROOT / "cni" / src).exists() and "COPY cni/ cni/" in BUILD, src


def test_the_image_stage_installs_no_build_tools_and_copies_only_built_trees() -> None:
    assert len(STAGES) == 2 and BUILD.startswith("FROM debian:trixie-slim AS build")
    assert not _apt_packages() & BUILD_ONLY, "a build-only package in the image"
    assert "python3-venv" in _apt_packages(BUILD)  # the venv is made in the build stage only
    assert all("--from=build" in line for line in FINAL.splitlines() if line.startswith(("COPY ", "ADD ")))
    assert "grpcio-tools" in BUILD and "gen-protos.sh" in BUILD and "pip install" not in FINAL


def test_host_configuration_reaches_the_build_only_as_secrets() -> None:
    """The CA bundle, apt settings and pip files are mounted per RUN (nodeenv/image/host.py passes them);
    no COPY, ADD, ARG or ENV names them."""
    for stage in STAGES:
        for line in stage.splitlines():
            if line.startswith("RUN ") and ("apt-get update" in line or "pip install" in line):
                assert "--mount=type=secret,id=ca," in line, line
            if line.startswith(("COPY ", "ADD ", "ARG ", "ENV ")):
                assert not re.search(r"pip\.conf|/etc/xdg|ca-certificates\.crt|apt\.conf|secrets", line), line
    assert "APT_CONFIG=/run/secrets/apt.conf" in FINAL and "PIP_CERT=/run/secrets/ca" in BUILD


def test_the_image_runs_debian_s_own_ovs_and_ovn() -> None:
    """Debian 13's openvswitch-switch 3.5 and OVN 25.03 as packaged: no ovs-vswitchd is built or
    diverted, and no C compiler is installed in either stage."""
    assert FINAL.startswith("FROM debian:trixie-slim")
    assert {"openvswitch-switch", "openvswitch-common", "ovn-central", "ovn-host"} <= _apt_packages()
    assert "build-ovs" not in INSTRUCTIONS and "dpkg-divert" not in INSTRUCTIONS
    assert not (ROOT / "scripts" / "build-ovs.sh").exists()
    copies = [line.split()[1:] for line in FINAL.splitlines() if line.startswith("COPY ")]
    assert len(copies) == 2  # the venv and the suite
    assert not (_apt_packages(BUILD) | _apt_packages()) & {"gcc", "make", "libc6-dev", "libssl-dev"}
