"""A run dir reached through its short alias (nodeenv/runtime_dir.py): unix sockets bind under it
whatever the run dir's depth, and the alias comes and goes with the run dir."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.cluster.settings import ClusterSettings
from nodeenv.node import Node, NodeSettings
from nodeenv.runtime_dir import (
    DEEPEST_SOCKET,
    SUN_PATH_MAX,
    RuntimeDirError,
    check_room,
    make_run_dir,
    remove_run_dir,
    short_path,
)
from nodeenv.sandbox import ClusterSandbox


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A runtime dir about as short as /run/k8shost."""
    path = Path(tempfile.mkdtemp(prefix="k8r", dir="/tmp"))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    """A run dir as deep as one in a 120-character checkout."""
    return tmp_path / ("c" * max(1, 120 - len(str(tmp_path)))) / ".run-sandbox"


def test_the_deepest_socket_binds_through_the_alias(deep: Path, runtime: Path) -> None:
    alias = make_run_dir(deep, runtime)
    sock = alias / DEEPEST_SOCKET
    sock.parent.mkdir(parents=True)
    assert len(str(deep / DEEPEST_SOCKET)) > SUN_PATH_MAX  # what bind refuses without the alias
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
    assert (deep / DEEPEST_SOCKET).is_socket()  # the socket is in the run dir, reached by the alias
    with socket.socket(socket.AF_UNIX) as s, pytest.raises(OSError):
        s.bind(str(deep / "x.sock"))


def test_the_alias_is_short_stable_and_a_path_below_it_is_its_own(deep: Path, runtime: Path) -> None:
    alias = short_path(deep, runtime)
    assert alias.parent == runtime and len(alias.name) == 8
    assert short_path(deep, runtime) == alias and short_path(deep.parent / "other", runtime) != alias
    assert short_path(alias / "nodes" / "node1", runtime) == alias / "nodes" / "node1"


def test_made_mended_and_removed_with_the_run_dir(deep: Path, runtime: Path) -> None:
    alias = make_run_dir(deep, runtime)
    (alias / "state").write_text("kept in the run dir")
    assert (deep / "state").read_text() == "kept in the run dir"
    alias.unlink()  # /run lost (a reboot): made again
    assert make_run_dir(deep, runtime) == alias and (alias / "state").exists()
    remove_run_dir(deep, runtime)
    assert not deep.exists() and not alias.is_symlink()


def test_a_node_works_through_the_alias_and_down_removes_both(deep: Path, runtime: Path) -> None:
    node = Node(NodeSettings(run_dir=deep, runtime_dir=runtime), [])
    node.up()
    assert node.run_dir == short_path(deep, runtime) and (deep / "node.env").exists()
    assert node.env_file.parent == node.run_dir
    node.down()
    assert not deep.exists() and not node.run_dir.is_symlink()


def test_a_runtime_dir_too_long_for_the_deepest_socket_is_refused(tmp_path: Path) -> None:
    check_room(Path("/run/k8shost"))
    with pytest.raises(RuntimeDirError, match="K8SHOST_RUNTIME_DIR"):
        check_room(Path("/run/" + "k" * 20))
    with pytest.raises(RuntimeDirError):
        make_run_dir(tmp_path / "run", Path("/run/" + "k" * 20))
    assert not (tmp_path / "run").exists()


def test_a_clusters_parts_and_node_roots_are_below_its_alias(deep: Path, runtime: Path) -> None:
    sandbox = ClusterSandbox(ClusterSettings(run_dir=deep, nodes=3, runtime_dir=runtime))
    c = sandbox.cluster
    assert c.run_dir == short_path(deep, runtime)
    parts = [c.control, c.central, sandbox.control, *(n.node for n in c.nodes)]
    assert all(p.run_dir.parent in (c.run_dir, c.run_dir / "nodes") for p in parts)
    root = c.nodes[2].node.settings.install_root
    assert root == c.run_dir / "nodes/node3/root"
    assert len(str(root / "var/lib/kubelet/plugins_registry/stor.plasmacloud.io-reg.sock")) <= SUN_PATH_MAX
