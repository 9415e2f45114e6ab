"""What the runner executes *as the node* sees the node's files: containerd runs the CNI plugins on
the host, where the plugin, its library and the agent's socket are at the paths an installer wrote
them to (`/opt/cni/bin/prismnet`, `/opt/cni/lib/prismnet`, `/run/prismnet/cni.sock`). The runner's
node keeps those trees under its root (volumes.NodeRoot), so a plugin runs in a private mount
namespace (`unshare --mount`) where the node's trees are bound over the machine's, the paths the
node shares with the machine (the pods' /run/netns, the xtables lock) staying the machine's. Nothing
is mounted outside that namespace and nothing is written to the machine."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from nodeenv.cni_component import CniRuntime
from nodeenv.kubelet.volumes import SHARED_WITH_MACHINE, NodeRoot

NODE_TREES = ("opt", "run", "etc/cni", "var/lib/cni")
"""The node's own trees a CNI plugin chain touches (binaries, sockets, configs, IPAM state)."""


def in_view(root: NodeRoot, path: str) -> Path:
    """Where the node view finds `path`: the node's own tree when it has it, else the machine's."""
    p = Path(path)
    for tree in NODE_TREES:
        mine = root.root / tree
        if (p == Path("/") / tree or Path("/") / tree in p.parents) and mine.is_dir():
            return mine / p.relative_to(Path("/") / tree)
    return p


def node_view(root: NodeRoot, argv: Sequence[str]) -> list[str]:
    """`argv` run in a private mount namespace where the node's trees are at their host paths."""
    binds: list[tuple[Path, Path]] = []
    for shared in SHARED_WITH_MACHINE:  # kept the machine's inside a node tree (bound in first)
        inside = root.root / shared.relative_to("/")
        if shared.exists() and any(inside.is_relative_to(root.root / t) for t in NODE_TREES):
            if shared.is_dir():
                inside.mkdir(parents=True, exist_ok=True)
            else:
                inside.parent.mkdir(parents=True, exist_ok=True)
                inside.touch(exist_ok=True)
            binds.append((shared, inside))
    for tree in NODE_TREES:
        if (root.root / tree).is_dir() and (Path("/") / tree).is_dir():
            binds.append((root.root / tree, Path("/") / tree))
    # real paths: the node root may be reached through its run dir's alias under /run
    # (nodeenv/runtime_dir.py), which is gone once the node's run tree is bound over /run
    script = "".join(f"mount --rbind {shlex.quote(os.path.realpath(s))} {shlex.quote(os.path.realpath(d))}\n"
                     for s, d in binds)  # fmt: skip
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script + 'exec "$@"', "sh",
            *argv]  # fmt: skip


class NodeCniRuntime(CniRuntime):
    """libcni on the node: the plugin dirs and the conflist's paths are the node's (`root`)."""

    def __init__(self, root: NodeRoot, conflist: dict[str, object], cni_path: list[str]) -> None:
        super().__init__(conflist, cni_path, {})
        self.root = root

    def locate(self, plugin_type: str) -> list[str]:
        for d in self.cni_path:
            if (in_view(self.root, d) / plugin_type).exists():
                return node_view(self.root, [str(Path(d) / plugin_type)])
        raise FileNotFoundError(f"{plugin_type} not in {self.cni_path} under the node root {self.root.root}")
