"""The OVN/OVS the node environment runs: build/ovn-trixie of this checkout, Debian 13's OVN 25.03
and OVS 3.5 (ovs-vswitchd included), made by `make ovs` (scripts/ovn-trixie.sh; docs/ovn-version.md).
There is no other: nothing of Debian 12's OVN/OVS in /usr is used.

The tree is `bin/` (the programs, patched to load the tree's own libraries) and `root/` (the trixie
minbase, whose /usr/share has the NB, SB and Open_vSwitch schemas the databases are made from).
`activate` puts `bin/` first in this process's PATH, so every daemon and tool the node environment,
a test or a bench starts by name (and every child that inherits the environment) is the tree's. Each
entry point calls it: nodeenv/cli.py, nodeenv/kubelet/cli.py, bench/, tests/conftest.py, and
nodeenv/ovn_stack.require_prerequisites before any daemon starts.
"""

from __future__ import annotations

import os
from pathlib import Path

from nodeenv.daemons import DaemonError

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "ovn-trixie"
# what a made tree has (scripts/ovn-trixie.sh writes TREE.txt last, after its version check)
MADE_MARKS = ("TREE.txt", "bin/ovn-northd", "bin/ovs-vswitchd", "bin/ovsdb-server")


def bin_dir() -> Path:
    return TREE / "bin"


def share(relative: str) -> Path:
    """A file of the tree's /usr/share, e.g. share("ovn/ovn-nb.ovsschema")."""
    return TREE / "root" / "usr" / "share" / relative


def missing() -> str:
    """Why the tree cannot be used ("" when it can)."""
    absent = [mark for mark in MADE_MARKS if not (TREE / mark).exists()]
    if absent:
        return f"{TREE} is not made (no {', '.join(absent)}): run `make ovs`"
    return ""


def activate(*, required: bool = True) -> None:
    """Puts the tree's bin/ first in this process's PATH (once). A tree not made is a DaemonError
    naming `make ovs`; with `required` False (the tear-down and status commands, a unit-test
    session) nothing changes then."""
    why = missing()
    if why:
        if required:
            raise DaemonError(why)
        return
    path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(os.pathsep)
    if path[0] != str(bin_dir()):
        os.environ["PATH"] = os.pathsep.join([str(bin_dir()), *path])


def in_tree(program: Path | str) -> bool:
    """Whether `program` (a path, e.g. /proc/<pid>/exe's target) is one of the tree's."""
    return Path(program).resolve().is_relative_to(TREE.resolve())
