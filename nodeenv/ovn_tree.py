"""Which OVN/OVS tools and schemas the node environment runs: Debian 12's from /usr (the default),
or those of another tree when `K8SHOST_OVN_TREE` names one (scripts/ovn-trixie.sh makes
build/ovn-trixie: Debian 13's OVN 25.03 and OVS 3.5; docs/ovn-version.md).

A tree is `<tree>/bin/` (the tools, patched to load the tree's own libraries; put first in PATH
by `activate`, so every daemon and tool the node environment or a test starts by name is the
tree's) and `<tree>/root/` (whose /usr/share has the NB, SB and Open_vSwitch schemas the databases
are made from).
ovs-vswitchd stays nodeenv/vswitchd.py's choice (build/ovs-3.5.0, from Debian 13's source).
"""

from __future__ import annotations

import os
from pathlib import Path

from nodeenv.daemons import DaemonError

ENV_VAR = "K8SHOST_OVN_TREE"
ROOT = Path(__file__).resolve().parent.parent


def tree() -> Path | None:
    """The tree K8SHOST_OVN_TREE names (relative to the checkout), None when unset."""
    named = os.environ.get(ENV_VAR, "")
    return (ROOT / named).resolve() if named else None


def share(relative: str) -> Path:
    """A file under /usr/share, from the tree when there is one."""
    chosen = tree()
    return (chosen / "root" if chosen else Path("/")) / "usr" / "share" / relative


def activate() -> None:
    """Puts the tree's bin/ first in this process's PATH (once); fails clearly on a bad tree."""
    chosen = tree()
    if chosen is None:
        return
    bin_dir = chosen / "bin"
    if not (bin_dir / "ovn-northd").exists():
        raise DaemonError(f"{ENV_VAR}={chosen}: no bin/ovn-northd (make it with scripts/ovn-trixie.sh)")
    path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(os.pathsep)
    if path[0] != str(bin_dir):
        os.environ["PATH"] = os.pathsep.join([str(bin_dir), *path])
