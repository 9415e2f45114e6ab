"""This node's NB rows deleted under the running agent: seen on the NB's IDL thread, written back by
the agent's rebuild task (cni/daemon/main.py, the path that writes a replaced NB again).

Who deletes them: node-controller releasing a node whose Node object is gone (an admin's `kubectl
delete node` on a live node), or an admin's `ovn-nbctl ls-del`/`lsp-del`. While the agent runs, its
rows win: its pods keep running (kubelet does not stop them when its Node is deleted, nor register
the Node again until it restarts), so their addresses and the management port's stay taken. Left
freed, the next namespace switch would be carved from the management switch's subnet and a pod
would get the node's own management address (issue 29).

A pod's port counts as lost only while its OVS interface is still bound: the agent's own DEL unbinds
the interface before it deletes the port, so its own deletions never come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from cni.management import management_names
from cni.ovn import K_NODE


class LostRows:
    """Names of this node's logical switch ports deleted since the last take(), and when the first went."""

    def __init__(self, node: str, loop: asyncio.AbstractEventLoop) -> None:
        self.node, self.management_lsp = node, management_names(node)[1]
        self.wake = asyncio.Event()
        self._loop, self._lock = loop, threading.Lock()
        self._names: set[str] = set()
        self._since = 0.0

    def on_port(self, event: str, row: Any) -> None:
        """An NB row hook (the IDL thread): a port of this node deleted (its switch's deletion too)."""
        if event != "delete":
            return
        name = getattr(row, "name", "")
        if name != self.management_lsp and getattr(row, "external_ids", {}).get(K_NODE) != self.node:
            return
        with self._lock:
            if not self._names:
                self._since = time.monotonic()
            self._names.add(name)
        with contextlib.suppress(RuntimeError):  # the loop closed: the agent is stopping
            self._loop.call_soon_threadsafe(self.wake.set)

    def take(self) -> tuple[set[str], float]:
        """(names, monotonic time of the first deletion) collected so far, and forgotten."""
        with self._lock:
            names, since, self._names = self._names, self._since, set()
        self.wake.clear()
        return names, since
