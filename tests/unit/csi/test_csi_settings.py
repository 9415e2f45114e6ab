"""Flags, environment fallbacks and validation (csi/settings.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.plasmacloud_grpc import PlasmaCloudAuth
from csi.settings import CsiSettings, split_host_port


def test_flags_win_over_env_and_env_over_defaults() -> None:
    env = {
        "CSI_MODE": "node",
        "CSI_NODE_ID": "env-node",
        "CSI_MAX_VOLUMES_PER_NODE": "7",
        "CSI_STATE_DIR": "/x",
    }
    s = CsiSettings.from_args(["--node-id", "flag-node"], env)
    assert (s.mode, s.node_id, s.max_volumes_per_node, s.state_dir) == ("node", "flag-node", 7, Path("/x"))
    assert s.serves_node and not s.serves_controller


def test_defaults() -> None:
    s = CsiSettings.from_args([], {"KUBE_NODE_NAME": "k8s-node"})
    assert s.mode == "all" and s.node_id == "k8s-node" and s.backend == "local"
    assert s.socket_path == Path("/var/lib/kubelet/plugins/stor.plasmacloud.io/csi.sock")


@pytest.mark.parametrize(
    "argv",
    [
        ["--endpoint", "tcp://1.2.3.4:5"],
        ["--backend", "lightningstor"],
        ["--backend", "lightningstor", "--lightningstor-endpoint", "x:1"],  # no CA and IAM token: refused
        ["--max-volumes-per-node", "-1"],
    ],
)
def test_invalid_settings_are_refused(argv: list[str]) -> None:
    with pytest.raises(ValueError):
        CsiSettings.from_args(argv, {})


def test_bad_choice_exits_like_argparse() -> None:
    with pytest.raises(SystemExit):
        CsiSettings.from_args(["--mode", "sideways"], {})


def test_auto_fs_type_follows_the_capability() -> None:
    s = CsiSettings.from_args(["--default-fs-type", "auto"], {})
    assert s.resolved_fs_type(True) == "ext4" and s.resolved_fs_type(False) == "xfs"
    assert CsiSettings(default_fs_type="xfs").resolved_fs_type(True) == "xfs"


def test_split_host_port() -> None:
    assert split_host_port("127.0.0.1:9808") == ("127.0.0.1", 9808)
    assert split_host_port(":9808") == ("0.0.0.0", 9808)
    assert split_host_port("[::1]:9808") == ("::1", 9808)


def test_help_names_every_env_fallback(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        CsiSettings.from_args(["--help"], {})
    assert info.value.code == 0
    out = capsys.readouterr().out
    env_vars = ["CSI_MODE", "CSI_ENDPOINT", "CSI_NODE_ID", "CSI_BACKEND", "CSI_STATE_DIR"]
    env_vars += ["LIGHTNINGSTOR_ENDPOINT", "CSI_METRICS_ADDRESS", "CSI_MAX_VOLUMES_PER_NODE"]
    for var in env_vars:
        assert var in out


def test_max_volumes_auto_default_and_qos_cgroup_fallbacks() -> None:
    s = CsiSettings.from_args([], {})
    assert s.max_volumes_per_node is None and s.qos_cgroup == "auto"
    assert s.resolved_max_volumes(4096) == 4096  # local backend: the loop devices the node holds
    creds = {"PLASMACLOUD_CA": "/pc/ca.crt", "PLASMACLOUD_TOKEN_FILE": "/pc/token"}
    ls = CsiSettings.from_args(["--backend", "lightningstor", "--lightningstor-endpoint", "x:1"], creds)
    assert ls.resolved_max_volumes(4096) == 0
    assert ls.plasmacloud == PlasmaCloudAuth(ca=Path("/pc/ca.crt"), token_file=Path("/pc/token"))
    env = {"CSI_MAX_VOLUMES_PER_NODE": "0", "CSI_QOS_CGROUP": "/sys/fs/cgroup/kubepods.slice"}
    s = CsiSettings.from_args([], env)
    assert s.resolved_max_volumes(4096) == 0 and s.qos_cgroup == "/sys/fs/cgroup/kubepods.slice"
    with pytest.raises(ValueError):
        CsiSettings.from_args(["--max-volumes-per-node", "many"], {})
