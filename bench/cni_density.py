"""Density mode of the CNI bench: many pods at once on one node, and who pays for each.

`python -m bench.bench_cni --density-only` (also part of `make bench BENCH=cni`):

1. N pods (default 100) ADDed at concurrency C (default 8) through each plugin's installed
   executable, every pod in its own netns, spread over 4 Kubernetes namespaces; then DELed at
   the same concurrency. The reference (Debian's bridge + host-local) runs in the same process,
   before and after ours, so both see the same machine. Printed: ADD/DEL p50/p99, pods/s.
2. CPU per pod of every process involved, from /proc before and after the ADDs: the CNI
   executables (getrusage of this process's children), the agent, each ovsdb-server, northd,
   ovn-controller, ovs-vswitchd; and OVN's own counters over the batch (`inc-engine/show-stats`
   of northd and ovn-controller: full recomputes against incremental runs).
3. Blocks of 50 up to 300 pods present (ours): per-pod CPU and ADD p50/p99 per block, to show
   whether the per-pod cost steps up as the node fills.
4. Floors: the same batch written straight to OVN with no CNI (one `ovn-nbctl` and one
   `ovs-vsctl` per port, veths made beforehand, waiting for `ovn-installed`), and the same over
   one raw OVSDB connection per database (no process start per port): what OVN itself costs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import cpu
from bench.ovn_counters import EngineStats, engine_stats
from bench.stats import pct
from nodeenv.cni_component import CniRuntime
from nodeenv.node import Node

NAMESPACES = 4
BLOCK = 50


def node_labels(run_dir: Path) -> dict[str, str]:
    """Command-line fragments -> labels, for this bench node's processes only."""
    ovs = run_dir / "ovs"
    return {
        f"ovsdb-server {ovs / 'ovs.db'}": "ovsdb-server (OVS)",
        f"ovsdb-server {ovs / 'nb.db'}": "ovsdb-server (NB)",
        f"ovsdb-server {ovs / 'sb.db'}": "ovsdb-server (SB)",
        f"ovs-vswitchd unix:{ovs / 'ovs.sock'}": "ovs-vswitchd",
        f"ovn-northd --ovnnb-db=unix:{ovs / 'nb.sock'}": "ovn-northd",
        f"ovn-controller unix:{ovs / 'ovs.sock'}": "ovn-controller",
        f"cni.daemon.main --socket {run_dir / 'prismnet'}": "prismnet-agent",
    }


def sample(labels: dict[str, str]) -> cpu.Sample:
    """CPU of this bench node's processes (`node_labels`), matched on the whole command line."""
    return cpu.sample(labels, words=None)


@dataclass
class Batch:
    """One batch of ADDs (then DELs) of one plugin."""

    plugin: str
    add_ms: list[float] = field(default_factory=list)
    del_ms: list[float] = field(default_factory=list)
    add_wall: float = 0.0
    del_wall: float = 0.0
    cpu_ms: dict[str, float] = field(default_factory=dict)
    """CPU ms per pod by process during the ADDs."""
    engine: dict[str, EngineStats] = field(default_factory=dict)
    """Per daemon: its engine counters' change over the ADDs."""

    @property
    def pods_per_s(self) -> float:
        return len(self.add_ms) / self.add_wall if self.add_wall else float("nan")

    @property
    def dels_per_s(self) -> float:
        return len(self.del_ms) / self.del_wall if self.del_wall else float("nan")


@dataclass
class Pods:
    """Pods of one plugin: netns made up front, ADD and DEL through its runtime."""

    name: str
    runtime: CniRuntime
    tag: str
    namespaces: int = NAMESPACES
    ns_prefix: str = "dens"
    """Pod k goes to Kubernetes namespace `<ns_prefix>-<k % namespaces>`."""
    live: dict[str, tuple[str, str, dict[str, Any]]] = field(default_factory=dict)
    """container id -> (netns, CNI_ARGS, result)"""
    seq: int = 0

    def make(self, n: int) -> list[tuple[str, str, str]]:
        out = []
        for _ in range(n):
            self.seq += 1
            netns = f"cnid-{os.getpid()}-{self.tag}{self.seq}"
            subprocess.run(["ip", "netns", "add", netns], check=True)
            cid = f"d{self.tag}{os.getpid()}x{self.seq:05d}".ljust(32, "0")
            ns = f"{self.ns_prefix}-{self.seq % self.namespaces}"
            args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=p{self.seq}"
            out.append((netns, cid, args))
        return out

    def add(self, pod: tuple[str, str, str]) -> float:
        netns, cid, args = pod
        t0 = time.perf_counter()
        call = self.runtime.add(cid, f"/run/netns/{netns}", args=args)
        ms = (time.perf_counter() - t0) * 1000
        if call.rc:
            raise RuntimeError(f"{self.name} ADD failed: {call.out} {call.stderr}")
        self.live[cid] = (netns, args, call.out)
        return ms

    def delete(self, cid: str) -> float:
        netns, args, result = self.live.pop(cid)
        t0 = time.perf_counter()
        call = self.runtime.delete(cid, f"/run/netns/{netns}", result, args=args)
        ms = (time.perf_counter() - t0) * 1000
        if call.rc:
            raise RuntimeError(f"{self.name} DEL failed: {call.out}")
        subprocess.run(["ip", "netns", "del", netns], check=False)
        return ms

    def delete_all(self, conc: int) -> list[float]:
        with ThreadPoolExecutor(conc) as ex:
            return list(ex.map(self.delete, list(self.live)))

    def forget_netns(self) -> None:
        """Interrupted run: remove the netns this process made (the node's teardown does the rest)."""
        for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
            if name.startswith(f"cnid-{os.getpid()}-{self.tag}"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True)


def add_batch(
    pods: Pods, n: int, conc: int, labels: dict[str, str], engines: Callable[[], dict[str, EngineStats]]
) -> Batch:
    """ADD n pods at concurrency conc, measuring latency, wall time, CPU and OVN's engine runs."""
    batch = Batch(pods.name)
    new = pods.make(n)
    e0, before = engines(), sample(labels)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as ex:
        batch.add_ms = list(ex.map(pods.add, new))
    batch.add_wall = time.perf_counter() - t0
    batch.cpu_ms = cpu.per_pod_ms(before, sample(labels), n)
    e1 = engines()
    batch.engine = {k: e1[k] - e0[k] for k in e1 if k in e0}
    return batch


def density_round(pods: Pods, n: int, conc: int, labels: dict[str, str], engines: Any) -> Batch:
    """n pods ADDed at concurrency conc, then all DELed at the same concurrency."""
    batch = add_batch(pods, n, conc, labels, engines)
    t0 = time.perf_counter()
    batch.del_ms = pods.delete_all(conc)
    batch.del_wall = time.perf_counter() - t0
    return batch


def engines_of(node: Node) -> Callable[[], dict[str, EngineStats]]:
    rundir = Path(node.endpoints["OVN_RUNDIR"])

    def read() -> dict[str, EngineStats]:
        return engine_stats(rundir)

    return read


def no_engines() -> dict[str, EngineStats]:
    return {}


@contextmanager
def cleanup_on_error(*all_pods: Pods) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for p in all_pods:
            try:
                p.delete_all(8)
            except Exception as e:  # reported; the node's teardown removes the rest
                print(f"    cleanup of {p.name} pods failed: {e}")
            p.forget_netns()
        raise


def fmt_ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"p50 {statistics.median(values):6.1f} ms  p99 {pct(values, 99):6.1f} ms"


def print_batch(b: Batch) -> None:
    print(
        f"    {b.plugin:18s} ADD {fmt_ms(b.add_ms)}  {b.pods_per_s:6.1f} pods/s | "
        f"DEL {fmt_ms(b.del_ms)}  {b.dels_per_s:6.1f} pods/s"
    )


def print_cpu(b: Batch) -> None:
    total = sum(b.cpu_ms.values())
    parts = sorted(b.cpu_ms.items(), key=lambda kv: -kv[1])
    print(
        f"    {b.plugin:18s} CPU per pod {total:6.1f} ms = "
        + " + ".join(f"{k} {v:.1f}" for k, v in parts if v >= 0.05)
    )


def print_engines(b: Batch, n: int) -> None:
    for daemon, stats in sorted(b.engine.items()):
        print(f"    {daemon:18s} over {n} ADDs: {stats.summary()}")


def pooled(batches: list[Batch]) -> Batch:
    out = Batch(batches[0].plugin)
    for b in batches:
        out.add_ms += b.add_ms
        out.del_ms += b.del_ms
        out.add_wall += b.add_wall
        out.del_wall += b.del_wall
        for k, v in b.cpu_ms.items():
            out.cpu_ms[k] = out.cpu_ms.get(k, 0.0) + v / len(batches)
        for k, s in b.engine.items():
            out.engine[k] = out.engine[k] + s if k in out.engine else s
    return out


def sequential(pods: Pods, n: int) -> list[float]:
    """Single-pod ADD latency: one pod at a time (each deleted before the next)."""
    out = []
    for pod in pods.make(n):
        out.append(pods.add(pod))
        pods.delete(pod[1])
    return out


def blocks(
    pods: Pods, total: int, conc: int, labels: dict[str, str], engines: Any, when_full: Callable[[], Any]
) -> tuple[list[Batch], Any]:
    """Fill the node to `total` pods in blocks of BLOCK, call `when_full` with them present, then
    remove them all."""
    out = []
    try:
        for _ in range(total // BLOCK):
            out.append(add_batch(pods, BLOCK, conc, labels, engines))
        full = when_full()
    finally:
        pods.delete_all(conc)
    return out, full
