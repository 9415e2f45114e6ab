"""The OVN/OVS daemons the sandbox runs are the tree's (nodeenv/ovn_tree.py, build/ovn-trixie: Debian
13's OVN 25.03 and OVS 3.5), read from each daemon's /proc/<pid>/exe and that program's --version; one
running from anywhere else (Debian 12's /usr/sbin, say) fails the step."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from nodeenv import ovn_tree
from nodeenv.daemons import is_alive
from nodeenv.node import Node
from nodeenv.scenario import Scenario


def run(scn: Scenario) -> None:
    c = scn.cluster
    parts = [scn.node] if c is None else [c.control, c.central, *(n.node for n in c.nodes)]
    where = scn.where(*(scn.at(i) for i in range(scn.spread)))
    with scn.step("ovn programs: every OVN/OVS daemon runs the tree's programs", on=where) as result:
        result.detail = summary(running(parts), ovn_tree.TREE, version)


def running(parts: Iterable[Node]) -> list[tuple[str, Path]]:
    """(name, the program /proc/<pid>/exe names) of each live ovs*/ovn* daemon the parts started."""
    found = []
    for node in parts:
        for rec in node.daemons.load():
            if rec.exe.startswith(("ovs", "ovn")) and is_alive(rec):
                found.append((rec.exe, Path(os.readlink(f"/proc/{rec.pid}/exe"))))
    return found


def version(program: Path) -> str:
    """ "ovn-northd 25.03.0" / "ovs-vswitchd (Open vSwitch) 3.5.0" -> the last word of the first line."""
    out = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=10).stdout
    return out.split("\n", 1)[0].split()[-1] if out.strip() else "?"


def summary(daemons: list[tuple[str, Path]], tree: Path, version: Callable[[Path], str]) -> str:
    """ "12 daemons from build/ovn-trixie; ovn-northd 25.03.0, ovs-vswitchd 3.5.0, ..."; a
    RuntimeError naming each daemon whose program is outside `tree`, or when there is none."""
    if not daemons:
        raise RuntimeError("no live OVN/OVS daemon found in the sandbox's daemon tables")
    outside = sorted({f"{name} runs {exe}" for name, exe in daemons if not exe.is_relative_to(tree)})
    if outside:
        raise RuntimeError(f"not the tree's ({tree}): {'; '.join(outside)}")
    programs = dict(sorted((name, exe) for name, exe in daemons))
    versions = ", ".join(f"{name} {version(exe)}" for name, exe in programs.items())
    return f"{len(daemons)} daemons from {tree.parent.name}/{tree.name}; {versions}"
