"""The sandbox scenario runner: named, timed steps, the node each ran on, and the table they print.

A scenario runs on one node (`make sandbox --nodes 1`) or on a cluster (nodeenv/sandbox.py). Each
part asks for the places its pods and commands go to with `scn.at(i)`: node i of the cluster
(round robin), or the one node. A `Place` is a node's name, its network namespace and its node.env
with the control part's endpoints (`Scenario.env`: the API double, the webhook, OVN central as
this namespace reaches them) laid over it, so a part reads node-local endpoints (the CNI conflist,
the CSI sockets) from its place and cluster-wide ones from `scn.env`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nodeenv.daemons import in_netns
from nodeenv.node import Node

if TYPE_CHECKING:
    from nodeenv.cluster.cluster import Cluster

SINGLE = "node"
"""The place name of the single node (`--nodes 1`)."""


@dataclass(frozen=True, eq=False)
class Place:
    """A node a step runs on: its name, its network namespace ("" = this one) and its endpoints."""

    name: str
    netns: str
    env: dict[str, str]
    install_root: Path

    def argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run on this node (in its network namespace)."""
        return in_netns(self.netns, argv)


@dataclass
class StepResult:
    name: str
    ok: bool
    seconds: float
    detail: str = ""
    node: str = ""


@dataclass
class Scenario:
    node: Node
    """The single node, or the cluster's sandbox part (the control view: `env`)."""
    places: list[Place] = field(default_factory=list)
    """The cluster's nodes ([] = the single node)."""
    cluster: Cluster | None = None
    results: list[StepResult] = field(default_factory=list)
    _cleanups: list[Callable[[], object]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return self.node.endpoints

    def at(self, i: int) -> Place:
        """Place `i` (node i+1 of the cluster, round robin; the single node whatever `i`)."""
        if not self.places:
            s = self.node.settings
            return Place(SINGLE, s.netns, self.node.endpoints, s.install_root)
        return self.places[i % len(self.places)]

    @property
    def spread(self) -> int:
        """How many distinct nodes `at` hands out."""
        return max(1, len(self.places))

    def where(self, *places: Place) -> str:
        """The node column for a step on these places: their names once each, in order."""
        return ",".join(dict.fromkeys(p.name for p in places))

    @contextmanager
    def step(self, name: str, on: str = "") -> Iterator[StepResult]:
        """A timed step; `on` names the node(s) it ran on ("": the control part, or the single node).
        The step may set the result's `detail` (a figure it measured)."""
        result = StepResult(name, False, 0.0, node=on or (SINGLE if not self.places else "control"))
        t0 = time.perf_counter()
        try:
            yield result
        except Exception as e:
            result.seconds, result.detail = time.perf_counter() - t0, f"{type(e).__name__}: {e}"
            self.results.append(result)
            raise
        result.ok, result.seconds = True, time.perf_counter() - t0
        self.results.append(result)

    def add_pod(
        self, env: dict[str, str], namespace: str, name: str, netns: str, *, chained: bool = True
    ) -> dict[str, object]:
        """A new network namespace `netns` ADDed as pod `namespace/name` through the node's installed
        `prismnet` (`env`: the place's); its DEL and the namespace's removal deferred. The CNI result."""
        from nodeenv.cni_component import installed_runtime  # it imports the CNI agent's settings

        rt = installed_runtime(env, chained=chained)
        cid, args = (
            f"{namespace}{name}".replace("-", "") + "0" * 24,
            (f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name}"),
        )
        subprocess.run(["ip", "netns", "add", netns], check=True, capture_output=True)
        self.defer(lambda: subprocess.run(["ip", "netns", "del", netns], check=False))
        call = rt.add(cid, f"/run/netns/{netns}", args=args)
        if call.rc:
            raise RuntimeError(f"ADD {namespace}/{name}: {call.out} {call.stderr}")
        self.defer(lambda: rt.delete(cid, f"/run/netns/{netns}", call.out, args=args))
        return call.out

    def defer(self, fn: Callable[[], object]) -> None:
        """Register a cleanup (its result is ignored); they run newest first when the scenario ends."""
        self._cleanups.append(fn)

    def run_cleanups(self) -> list[str]:
        errors = []
        while self._cleanups:
            fn = self._cleanups.pop()
            try:
                fn()
            except Exception as e:
                errors.append(f"{getattr(fn, '__name__', fn)}: {e}")
        return errors

    def table(self) -> str:
        width = max([len(r.name) for r in self.results] + [4])
        nodes = max([len(r.node) for r in self.results] + [4])
        lines = [f"{'step':<{width}}  {'node':<{nodes}}  result  time",
                 f"{'-' * width}  {'-' * nodes}  ------  -----------"]  # fmt: skip
        for r in self.results:
            res = "ok" if r.ok else "FAILED"
            lines.append(f"{r.name:<{width}}  {r.node:<{nodes}}  {res:<6}  {r.seconds * 1000:8.1f} ms")
            if r.detail:
                lines.append(f"{'':<{width}}  {'':<{nodes}}    {r.detail}")
        return "\n".join(lines)
