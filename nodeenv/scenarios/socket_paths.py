"""Unix sockets whatever the checkout's depth (nodeenv/runtime_dir.py): every socket a node's daemons
made (OVS's, the PrismNET agent's, the CSI plugin's and its kubelet registration socket) is under
the node's run dir reached through its short alias, each path fits in sun_path, and each accepts a
connection there; the detail names the run dir's real path and its length."""

from __future__ import annotations

import socket
from pathlib import Path

from nodeenv.runtime_dir import SUN_PATH_MAX
from nodeenv.scenario import Place, Scenario


def run(scn: Scenario) -> None:
    places = [scn.at(i) for i in range(scn.spread)]
    name = "socket paths: every node's sockets below its run dir's alias, answering"
    with scn.step(name, on=scn.where(*places)) as step:
        found = {place.name: _sockets(place) for place in places}
        everything = [s for socks in found.values() for s in socks]
        if not all(found.values()):
            raise RuntimeError(f"no socket found on {[n for n, s in found.items() if not s]}")
        too_long = [str(s) for s in everything if len(str(s)) > SUN_PATH_MAX]
        silent = [str(s) for s in everything if not _answers(s)]
        if too_long or silent:
            raise RuntimeError(f"too long: {too_long}; not answering: {silent}")
        alias = Path(places[0].env["K8SHOST_RUN_DIR"])
        longest = max(everything, key=lambda s: len(str(s)))
        step.detail = (
            f"{len(everything)} sockets, the longest {len(str(longest))} bytes ({longest.name}); "
            f"{alias} is {alias.resolve()} ({len(str(alias.resolve()))} bytes)"
        )


def _sockets(place: Place) -> list[Path]:
    """The sockets below the node's run dir (by its alias) and its kubelet registration dir."""
    run_dir = Path(place.env["K8SHOST_RUN_DIR"])
    registry = place.install_root / "var/lib/kubelet/plugins_registry"
    roots = [run_dir] + ([registry] if not registry.is_relative_to(run_dir) else [])
    return sorted({p for root in roots if root.is_dir() for p in root.rglob("*") if p.is_socket()})


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True
