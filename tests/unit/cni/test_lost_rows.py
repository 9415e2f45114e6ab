"""cni/daemon/lost_rows.py: which NB deletions the agent writes back (its node's ports and its
management port, deleted), collected until taken."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from cni.daemon.lost_rows import LostRows
from cni.ovn import K_NODE


def _row(name: str, node: str = "") -> SimpleNamespace:
    return SimpleNamespace(name=name, external_ids={K_NODE: node} if node else {})


async def test_only_this_nodes_deleted_ports_are_collected_once() -> None:
    lost = LostRows("node1", asyncio.get_running_loop())
    lost.on_port("create", _row("web-c1", "node1"))
    lost.on_port("update", _row("mgmt.node1"))
    lost.on_port("delete", _row("db-c2", "node2"))  # another node's: its agent's to write back
    lost.on_port("delete", _row("k8s-a-rtr"))  # a router port: written with its switch
    await asyncio.sleep(0)
    assert not lost.wake.is_set() and lost.take()[0] == set()
    lost.on_port("delete", _row("web-c1", "node1"))
    lost.on_port("delete", _row("mgmt.node1"))  # its ids may be gone with the row: the name counts
    await asyncio.sleep(0)
    assert lost.wake.is_set()
    names, since = lost.take()
    assert names == {"web-c1", "mgmt.node1"} and since > 0
    assert not lost.wake.is_set() and lost.take()[0] == set()
