"""Containers started from the built image run what the manifests and the suite's code run."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from nodeenv.image.build import image_name
from nodeenv.image.store import ImageStore
from tests.image.conftest import Run
from tests.unit.daemonsets.rendered import ROOT, suite_containers
from tests.unit.daemonsets.test_image import CODE_RUNS, programs_run

SCRIPTS = sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])
SIZE_LIMIT = 450e6


@pytest.mark.parametrize("program", [p for p in SCRIPTS if p != "prismnet"])
def test_every_entry_point_starts_and_answers_help(run: Run, program: str) -> None:
    proc = run(program, "--help")
    assert proc.returncode == 0 and f"usage: {program}" in proc.stdout, proc.stderr


def test_the_cni_shim_answers_version_as_a_runtime_calls_it(run: Run) -> None:
    proc = run("prismnet", env={"CNI_COMMAND": "VERSION"})
    assert proc.returncode == 0, proc.stderr
    assert "1.1.0" in json.loads(proc.stdout)["supportedVersions"]


def test_libraries_import_with_ovs_c_parser_and_generated_stubs(run: Run) -> None:
    code = (
        "import ovsdbapp, pyroute2, grpc, aiohttp, kubernetes_asyncio, jwt, dnslib, yaml\n"
        "import ovs.json\n"
        "from protos import csi_pb2_grpc, prismnet_pb2_grpc, fiberlb_pb2_grpc, flashdns_pb2_grpc\n"
        "print(ovs.json.PARSER)"
    )
    proc = run("python", "-c", code)
    assert proc.returncode == 0 and proc.stdout.strip() == "C", proc.stderr


@pytest.mark.parametrize(
    ("program", "version"),
    [("ovs-vsctl", "3.5"), ("ovs-vswitchd", "3.5"), ("ovsdb-server", "3.5"), ("ovn-nbctl", "25.03"),
     ("ovn-sbctl", "25.03"), ("ovn-northd", "25.03"), ("ovn-controller", "25.03")],
)  # fmt: skip
def test_ovs_and_ovn_programs_report_debian_s_versions(run: Run, program: str, version: str) -> None:
    proc = run(program, "--version")
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    assert proc.returncode == 0 and re.match(rf"{program} (\(Open vSwitch\) )?{version}\.", first), (
        proc.stderr
    )


def test_python_is_debian_13_s_3_13_at_the_venv_path(run: Run) -> None:
    proc = run("/app/.venv/bin/python", "-c", "import sys; print(sys.version_info[:2], sys.prefix)")
    assert proc.stdout.split("\n")[0] == "(3, 13) /app/.venv", proc.stderr


def test_every_program_the_manifests_and_the_code_run_is_on_the_path(run: Run) -> None:
    commands = {c["command"][0] for _, c in suite_containers() if c.get("command")}
    wanted = {p for _, c in suite_containers() for p in programs_run(c)} | commands
    wanted |= set().union(*CODE_RUNS.values())
    assert {"prismnet-agent", "ovn-controller", "ovsdb-tool", "mkfs.xfs"} <= wanted
    wanted |= {"getent", "awk"}  # ovn-central's member script finds its peers with them
    script = "for p in " + " ".join(sorted(wanted)) + '; do command -v "$p" >/dev/null || echo "$p"; done'
    proc = run("sh", "-c", script)
    assert (proc.returncode, proc.stdout.split()) == (0, []), proc.stderr


def test_build_only_tools_stay_in_the_build_stage(run: Run) -> None:
    code = (
        "import importlib.util as u\n"
        "print([m for m in ('pip', 'setuptools', 'grpc_tools') if u.find_spec(m)])"
    )
    proc = run("python", "-c", code)
    assert proc.stdout.strip() == "[]", proc.stderr
    proc = run(
        "sh", "-c", "command -v gcc cc pip pip3; dpkg -l python3-venv python3-pip 2>/dev/null | grep ^ii"
    )
    assert proc.stdout == "", proc.stdout
    proc = run("sh", "-c", "ls -A /app; ls /staging /opt/build 2>&1 >/dev/null | wc -l")
    assert proc.stdout.split() == [".venv", "2"]  # the venv only: no sources, no build trees


def test_config_root_user_no_default_program_venv_first_on_path(store: ImageStore, image: str) -> None:
    config = json.loads(store("image", "inspect", "--format", "{{json .Config}}", image))
    assert config.get("User", "") in ("", "0", "root")  # the node agents need root
    assert not config.get("Entrypoint") and not config.get("Cmd")  # every manifest names its program
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PATH"].startswith("/app/.venv/bin:") and env["PYTHONUNBUFFERED"] == "1"
    assert image == image_name()


def test_image_stays_under_its_size_target(store: ImageStore, image: str) -> None:
    size = store.size(image)
    print(f"{image}: {size / 1e6:.0f} MB")
    assert size < SIZE_LIMIT, f"{image} is {size / 1e6:.0f} MB, over the {SIZE_LIMIT / 1e6:.0f} MB target"
