"""A node environment of a bench's own: a temp dir, the node up, and on the way out the node down,
what its evidence check kept named (nodeenv/evidence.py), and the temp dir removed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from nodeenv.node import Component, Node, NodeSettings


@contextmanager
def private_node(
    prefix: str, bridge: str, system_id: str, components: Callable[[NodeSettings], list[Component]]
) -> Iterator[tuple[Node, Path]]:
    """(the node, its temp dir) for a `with`: run dir and install root inside /tmp/<prefix>*."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    settings = NodeSettings(
        run_dir=tmp / "node", bridge=bridge, system_id=system_id, install_root=tmp / "root"
    )
    node = Node(settings, components(settings))
    node.up()
    try:
        yield node, tmp
    finally:
        node.down()
        if node.evidence:
            print(f"  evidence kept in {node.evidence}: {'; '.join(map(str, node.faults))}")
        shutil.rmtree(tmp, ignore_errors=True)
