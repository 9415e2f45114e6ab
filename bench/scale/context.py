"""The scale bench's world: one 3-node RAFT cluster of its own, an admin client of its API double
(kubernetes_asyncio, on one event loop the steps share), its pods (network namespaces through each
node's installed plugin) and servers in them, and a traffic probe from a pod's namespace."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from controllers.machinery import KubeClient
from controllers.machinery.kubeconfig import load_api_client
from nodeenv.cluster.churn import ClusterPods, LivePod
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.node import read_env_file
from tests.integration.controllers.fiberlb.netns_traffic import Servers
from tests.integration.controllers.netpol.traffic import in_netns

T = TypeVar("T")
BATCH = 32
"""API writes in flight while a step loads its objects."""


def answer(netns: str, ip: str, port: int, connect_timeout: float = 0.1) -> str:
    """One HTTP/1.0 request from inside `netns`: the server's name, "" when nothing answered."""

    def go() -> str:
        try:
            with socket.create_connection((ip, port), timeout=connect_timeout) as s:
                s.settimeout(2)
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
            return data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")
        except OSError:
            return ""

    return in_netns(netns, go)


def until(netns: str, ip: str, port: int, want: Callable[[str], bool], timeout: float = 60.0) -> float:
    """time.perf_counter() at the start of the first request whose answer `want`s."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        if want(answer(netns, ip, port)):
            return started
        time.sleep(max(0.0, 0.02 - (time.perf_counter() - started)))
    raise TimeoutError(f"{ip}:{port} from {netns}: no wanted answer in {timeout:.0f} s")


def until_steady(
    netns: str, ip: str, port: int, want: Callable[[str], bool], hold: float = 0.5, timeout: float = 60.0
) -> float:
    """Like `until`, for a change that lasts: the start of the first request of a run of wanted
    answers that held `hold` seconds. A refusal read from one request can be a connect that was only
    slow (a loaded datapath), which would end a policy's wait early."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        first = until(netns, ip, port, want, deadline - time.perf_counter())
        while want(answer(netns, ip, port)):
            if time.perf_counter() - first >= hold:
                return first
            time.sleep(0.02)
    raise TimeoutError(f"{ip}:{port} from {netns}: no wanted answer held {hold} s in {timeout:.0f} s")


@dataclass
class ScaleContext:
    cluster: Cluster
    pods: ClusterPods
    loop: asyncio.AbstractEventLoop
    client: KubeClient
    rounds: int
    servers: Servers = field(default_factory=Servers)
    state: dict[str, Any] = field(default_factory=dict)
    """Each curve's own world, kept between its steps."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def node(self, i: int) -> ClusterNode:
        return self.cluster.nodes[i % len(self.cluster.nodes)]

    def pod(self, node: int, namespace: str, name: str) -> LivePod:
        made, outcome = self.pods.add(self.node(node), namespace, name)
        if made is None:
            raise RuntimeError(f"pod {namespace}/{name}: {outcome.error}")
        return made

    def serve(self, pod: LivePod, port: int = 8080) -> None:
        self.servers.start(pod.netns, pod.ref.name, port)

    @property
    def env(self) -> dict[str, str]:
        return read_env_file(self.cluster.env_file)

    def nbctl(self, *args: str) -> str:
        argv = ["ovn-nbctl", f"--db={self.env['OVN_NB_DB']}", "--timeout=120", *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


async def in_batches(calls: Iterable[Callable[[], Awaitable[object]]], batch: int = BATCH) -> None:
    pending: list[Awaitable[object]] = []
    for call in calls:
        pending.append(call())
        if len(pending) >= batch:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)


@contextmanager
def scale_cluster(prefix: str, rounds: int) -> Iterator[ScaleContext]:
    run = Path(tempfile.mkdtemp(prefix="ks", dir="/tmp"))  # short: unix socket paths below it
    c = Cluster(ClusterSettings(run_dir=run / "c", nodes=3, prefix=prefix, cluster_cidr="10.94.0.0/16",
                                ovn_central="raft"))  # fmt: skip
    t0 = time.monotonic()
    c.up()
    print(f"3-node RAFT cluster up in {time.monotonic() - t0:.1f} s ({run}, prefix {prefix})")
    loop = asyncio.new_event_loop()
    pods = ClusterPods(c, tag="s", attempts=3)
    ctx = None
    try:
        api = loop.run_until_complete(
            load_api_client(Path(read_env_file(c.env_file)["KUBECONFIG"]), in_cluster=False)
        )
        ctx = ScaleContext(c, pods, loop, KubeClient(api), rounds)
        yield ctx
    finally:
        if ctx is not None:
            ctx.servers.stop()
            loop.run_until_complete(ctx.client.api.close())
        loop.close()
        pods.delete_all()
        c.down()
        subprocess.run(["rm", "-rf", str(run)])
