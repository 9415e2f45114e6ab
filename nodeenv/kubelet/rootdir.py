"""kubelet's root directory (`/var/lib/kubelet` under the node's root) made as kubelet makes it when
it starts (setupDataDirs): `pods/`, `plugins/`, `plugins_registry/`, and the directory itself a
shared mount (MakeRShared: bound onto itself unless it is a mount point, then `--make-rshared`).
A container's Bidirectional mount of it (a CSI node plugin's staging and publish mounts) needs a
shared source, as on any node: this machine's `/` is a private mount. The runner removes the bind
when it stops (kubelet keeps it for the node's lifetime)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)
DATA_DIRS = ("pods", "plugins", "plugins_registry")


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


def _is_mount_point(path: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


def setup(path: Path) -> bool:
    """Make the directories and the shared mount; True when a bind was made here (undo it later)."""
    for d in DATA_DIRS:
        (path / d).mkdir(parents=True, exist_ok=True)
    bound = False
    if not _is_mount_point(path):
        proc = _mount("--bind", str(path), str(path))
        if proc.returncode:
            raise OSError(f"kubelet root {path}: mount --bind: {proc.stderr.strip()}")
        bound = True
    proc = _mount("--make-rshared", str(path))
    if proc.returncode:
        raise OSError(f"kubelet root {path}: mount --make-rshared: {proc.stderr.strip()}")
    return bound


def mounts_under(path: Path) -> list[str]:
    """Mount points below `path` (not `path` itself), from this process's mount table."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    real = os.path.realpath(path)  # the mount table names real paths (path may be a run dir's alias)
    return [p for p in points if p.startswith(f"{real}/")]


def teardown(path: Path) -> None:
    """Remove the bind setup() made, with whatever is still mounted below it (named in the log: a
    volume a pod's teardown did not unmount, a mount a container propagated back)."""
    left = mounts_under(path)
    if left:
        log.warning("kubelet root %s: still mounted at the runner's stop, unmounted: %s", path, left)
    proc = subprocess.run(["umount", "-R", str(path)], capture_output=True, text=True)
    if proc.returncode:
        log.warning("kubelet root %s left mounted: %s", path, proc.stderr.strip())
