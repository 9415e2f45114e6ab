"""The short path an environment reaches its run dir by, so its unix sockets fit in sun_path.

A unix socket's path holds at most 107 bytes, and a node's deepest socket is its CSI registration
socket, `<root>/var/lib/kubelet/plugins_registry/stor.plasmacloud.io-reg.sock`, its root being
`<run dir>/nodes/node3/root` in a cluster: from a checkout deeper than a few directories, gRPC,
aiohttp and Python's socket module refuse to bind. So every environment (node-up, cluster mode,
the sandbox, boot) works in its run dir through a symlink `/run/k8shost/<8 hex digits of the run
dir's real path>` (env K8SHOST_RUNTIME_DIR), made with the run dir and removed with it: every path
the components are given, sockets included, is under that alias, so the layouts real components
expect (kubelet's under the node's root, the agent socket the conflist names, OVS's own) stay as
they are, while state and logs stay in the run dir in the checkout.

The kernel reports the real path (mount tables, a loop device's backing file, /proc/<pid>/cwd):
compare those with `os.path.realpath` of a path, never with the path as given.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

RUNTIME_DIR = Path("/run/k8shost")
SUN_PATH_MAX = 107
DEEPEST_SOCKET = "nodes/node99/root/var/lib/kubelet/plugins_registry/stor.plasmacloud.io-reg.sock"
"""Relative to the alias: the longest socket path an environment makes (a cluster's 99th node)."""


class RuntimeDirError(ValueError):
    pass


def runtime_dir_from_env(env: Mapping[str, str]) -> Path:
    return Path(env.get("K8SHOST_RUNTIME_DIR", str(RUNTIME_DIR)))


def short_path(run_dir: Path, runtime_dir: Path = RUNTIME_DIR) -> Path:
    """The alias of `run_dir` under `runtime_dir`; `run_dir` itself when it is already below it (a
    cluster's node inside the cluster's alias)."""
    if run_dir.is_relative_to(runtime_dir):
        return run_dir
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]
    return runtime_dir / digest


def check_room(runtime_dir: Path) -> None:
    """Refuse a runtime dir too long for the deepest socket an environment makes under it."""
    deepest = short_path(Path("/x"), runtime_dir) / DEEPEST_SOCKET
    if len(str(deepest)) > SUN_PATH_MAX:
        raise RuntimeDirError(
            f"the runtime dir {runtime_dir} (K8SHOST_RUNTIME_DIR) is too long for the unix sockets under "
            f"it ({deepest} is {len(str(deepest))} bytes, at most {SUN_PATH_MAX}): give a shorter one"
        )


def make_run_dir(run_dir: Path, runtime_dir: Path = RUNTIME_DIR) -> Path:
    """Create `run_dir` (if missing) and its alias (again, if it was lost with /run); the alias."""
    alias = short_path(run_dir, runtime_dir)
    if alias != run_dir:
        check_room(runtime_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    link_run_dir(run_dir, runtime_dir)
    return alias


def link_run_dir(run_dir: Path, runtime_dir: Path = RUNTIME_DIR) -> None:
    """The alias pointing at `run_dir` (when it exists): made, or mended if it points elsewhere."""
    alias = short_path(run_dir, runtime_dir)
    if alias == run_dir or not run_dir.is_dir():
        return
    target = run_dir.resolve()
    if alias.is_symlink() and Path(os.readlink(alias)) == target:
        return
    runtime_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    alias.unlink(missing_ok=True)
    alias.symlink_to(target, target_is_directory=True)


def remove_run_dir(run_dir: Path, runtime_dir: Path = RUNTIME_DIR) -> None:
    """Remove `run_dir` and its alias (what the alias points at, if the run dir was given by it)."""
    alias = short_path(run_dir, runtime_dir)
    shutil.rmtree(run_dir.resolve(), ignore_errors=True)
    if alias != run_dir and alias.is_symlink():
        alias.unlink()
