"""`python -m nodeenv.kubelet`: flags over environment fallbacks, bad settings refused with the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nodeenv.kubelet import boot
from nodeenv.kubelet.cli import build_parser, main


def settings(argv: list[str], env: dict[str, str]) -> boot.BootSettings:
    return boot.BootSettings.from_args(build_parser(env).parse_args(["boot", *argv]))


def test_env_fallbacks_and_flags_over_them(tmp_path: Path) -> None:
    env = {"K8SHOST_BOOT_DIR": str(tmp_path / "b"), "K8SHOST_BOOT_API_ADDRESS": "198.18.7.1",
           "K8SHOST_OVS_DATAPATH": "netdev", "K8SHOST_BOOT_TIMEOUT": "30"}  # fmt: skip
    s = settings([], env)
    assert (s.run_dir, s.api_address, s.datapath, s.timeout) == (tmp_path / "b", "198.18.7.1", "netdev", 30.0)
    assert s.kubeconfig == tmp_path / "b" / "kubeapi" / "admin.kubeconfig"
    s = settings(["--api-address", "198.18.9.9", "--datapath", "system"], env)
    assert (s.api_address, s.datapath) == ("198.18.9.9", "system")
    assert settings([], {}).overlay.parts[-3:] == ("daemonsets", "overlays", "k3s")
    assert (settings([], {}).nodes, settings([], {"K8SHOST_NODES": "1"}).nodes) == (3, 1)


@pytest.mark.parametrize(("argv", "why"), [(["--api-address", "nope"], "nope"),
                                           (["--datapath", "dpdk"], "auto, system or netdev"),
                                           (["--nodes", "0"], "1 or more, not '0'"),
                                           (["--nodes", "three"], "not 'three'")])  # fmt: skip
def test_bad_settings_named(argv: list[str], why: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["boot", *argv], {}) == 2
    assert why in capsys.readouterr().err


def test_run_requires_its_paths(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"], {}) == 2
    assert "--kubeconfig, --node-root and --state-dir are required" in capsys.readouterr().err


def test_status_and_down_of_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--run-dir", str(tmp_path / "x")], {}) == 1
    assert main(["down", "--run-dir", str(tmp_path / "x")], {}) == 0
    out = capsys.readouterr().out
    assert "not booted" in out and "nothing to stop" in out


def test_help_names_every_command_and_env_fallback() -> None:
    out = subprocess.run([sys.executable, "-m", "nodeenv.kubelet", "--help"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    for word in (
        "run",
        "boot",
        "down",
        "status",
        "K8SHOST_BOOT_DIR",
        "KUBECONFIG",
        "K8SHOST_BOOT_API_ADDRESS",
        "K8SHOST_NODES",
        "K8SHOST_NODE_NETNS",
        "K8SHOST_RUN_CONTROLLERS",
    ):
        assert word in out


def test_boot_without_the_image_says_make_image_and_makes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"K8SHOST_IMAGE_STORE": str(tmp_path / "empty-store"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    assert main(["boot", "--run-dir", str(tmp_path / "run")], env) == 1
    err = capsys.readouterr().err
    assert "boot: cannot start: the image registry.plasmacloud.io/k8shost:0.1.0 is not in" in err
    assert "run `make image`" in err
    assert not (tmp_path / "run").exists()
