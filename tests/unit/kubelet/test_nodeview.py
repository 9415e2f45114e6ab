"""The node view's binds name real paths: a node root reached through its run dir's alias under /run
(nodeenv/runtime_dir.py) is gone from the plugin's mount namespace once the node's run tree is bound
over /run, and the binds after it would fail."""

from __future__ import annotations

from pathlib import Path

from nodeenv.kubelet.nodeview import node_view
from nodeenv.kubelet.volumes import NodeRoot


def test_binds_name_the_node_roots_real_path_not_its_alias(tmp_path: Path) -> None:
    real = tmp_path / "checkout/.run-boot/node"
    for tree in ("opt", "run", "etc/cni", "var/lib/cni"):
        (real / tree).mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.symlink_to(real.parent)
    script = node_view(NodeRoot(alias / "node"), ["/opt/cni/bin/prismnet"])[7]
    binds = [line.split()[2:] for line in script.splitlines() if line.startswith("mount --rbind")]
    trees = [t for t in ("opt", "run", "etc/cni") if (Path("/") / t).is_dir()]  # those this machine has
    assert [b[0] for b in binds if b[1] in [f"/{t}" for t in trees]] == [str(real / t) for t in trees]
    assert str(alias) not in script
