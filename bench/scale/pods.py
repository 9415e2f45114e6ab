"""The pods-per-node curve (issue 33 item 1, pods part): one node filled to 100, 300, 1,000 pods
(network namespaces ADDed through the installed `prismnet` plugin, no containers) and, at each
size, what one more batch of pods costs beside OVN's own floor at that size.

At each size: the node is filled (untimed, concurrency 8) to `size - PROBE - READY` pods, then
PROBE pods are ADDed at concurrency 8 (timed: ADD p50/p99; CPU per pod of the agent and of
ovn-northd, per NB change = per pod) and READY pods one at a time with an ICMP echo to the
gateway (ready: ADD start -> first reply). Then PROBE ports go straight to OVN through the IDL
floor (bench/scale/floor.py) with `size` pods present, and removed. Both are broken down by
stage (NB row -> SB Port_Binding -> claim -> ovn-installed) by the same raw monitors.

    flock /tmp/k8shost-ovn.lock python -m bench.scale.pods [--sizes 100,300,1000]

(SCALE_MAX bounds the largest size; the lock: one userspace-datapath ovs-vswitchd per machine)

`step(ctx, size) -> dict[str, float]` measures one size on a PodsCtx; `frame_step(ctx, size)` is
the same for `make bench BENCH=scale`'s frame (`CURVE`, in bench_scale's CURVES): both print the
frame's table (bench/scale/frame.py: one growth exponent, log-log between consecutive sizes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import cpu
from bench.bench_cni import bench_node, icmp_socket, phase_medians, ping_until
from bench.cni_batch_floor import FloorPort, make_ports, remove_ports, switches
from bench.cni_density import Pods, node_labels, sample
from bench.cni_floor import RawOvsdb
from bench.scale.floor import IdlFloor, StageClock, StageRun, floor_batch, print_beside, stage_run
from bench.scale.frame import Curve, Row, sizes_within, table
from bench.stats import pct
from nodeenv.cni_component import installed_runtime
from nodeenv.node import Node
from nodeenv.ovn_stack import missing_prerequisites

SIZES = (100, 300, 1000)
NAMESPACES = 8
PROBE, READY, CONC = 50, 10, 8


@dataclass
class PodsCtx:
    node: Node
    pods: Pods
    clock: StageClock
    floor: IdlFloor
    labels: dict[str, str]
    rss0: float = 0.0
    """The agent's RSS (MB) with no pods."""
    runs: dict[int, tuple[StageRun, StageRun]] = field(default_factory=dict)
    """size -> (ours, floor) stage runs."""
    phases: dict[int, str] = field(default_factory=dict)
    """size -> the agent's own per-phase medians over the timed ADDs (from its log)."""


@contextmanager
def pods_context(tmp: Path) -> Iterator[PodsCtx]:
    with bench_node(tmp, bridge="br-cniscale", system_id="cni-scale") as node:
        e = node.endpoints
        # a /24 per namespace: 1,000 pods over 8 leave room for the floor's ports from .200 up
        pods = Pods("prismnet", installed_runtime(e, chained=False), "s", NAMESPACES, "scale")
        clock = StageClock(e["OVN_NB_DB"], e["OVN_SB_DB"], [e["OVS_DB"]])
        floor = IdlFloor(e["OVN_NB_DB"], e["OVS_DB"], e["OVS_BRIDGE"])
        try:
            yield PodsCtx(node, pods, clock, floor, node_labels(node.run_dir), _agent_rss_mb(node))
        finally:
            floor.close()
            clock.close()
            try:
                pods.delete_all(CONC)
            finally:
                pods.forget_netns()


def _agent_rss_mb(node: Node) -> float:
    pid = next(r.pid for r in node.daemons.load() if r.name == "prismnet-agent")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _agent_log(node: Node) -> list[str]:
    return (node.run_dir / "prismnet" / "agent.log").read_text().splitlines()


def _db_kb(node: Node, name: str) -> float:
    return (node.run_dir / "ovs" / name).stat().st_size / 1024


def _rows(remote: str, db: str, table: str) -> int:
    raw = RawOvsdb(remote, db, {})
    try:
        return len(
            raw.transact({"op": "select", "table": table, "where": [], "columns": ["_uuid"]})[0]["rows"]
        )
    finally:
        raw.close()


def _timed_adds(ctx: PodsCtx, n: int) -> tuple[list[float], StageRun]:
    started: dict[str, float] = {}

    def add(pod: tuple[str, str, str]) -> float:
        started[pod[1]] = time.monotonic()
        return ctx.pods.add(pod)

    new = ctx.pods.make(n)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(CONC) as ex:
        ms = list(ex.map(add, new))
    wall = time.perf_counter() - t0
    ctx.clock.refresh()
    by_lsp = {ctx.clock.cid_lsp[c]: t for c, t in started.items() if c in ctx.clock.cid_lsp}
    return ms, stage_run(ctx.clock, by_lsp, wall)


def _ready(ctx: PodsCtx, n: int) -> list[float]:
    out = []
    for pod in ctx.pods.make(n):
        sock = icmp_socket(pod[0])
        try:
            t0 = time.perf_counter()
            ctx.pods.add(pod)
            gw = str(ctx.pods.live[pod[1]][2]["ips"][0]["gateway"])
            if ping_until(sock, gw):
                out.append((time.perf_counter() - t0) * 1000)
        finally:
            sock.close()
    return out


def _floor(ctx: PodsCtx, size: int) -> StageRun:
    e = ctx.node.endpoints
    subnets = switches(e["OVN_NB_DB"], [f"k8s-scale-{i}" for i in range(NAMESPACES)])
    ports: list[FloorPort] = []
    try:
        make_ports(PROBE, subnets, f"z{size}-", ports)
        time.sleep(0.5)  # ovs-vswitchd sees the new links before the clock starts
        run, _ = floor_batch(ctx.floor, ctx.clock, ports, CONC)
        return run
    finally:
        ctx.floor.unbind([p for p in ports])
        remove_ports(ports, e)


def step(ctx: PodsCtx, size: int) -> Row:
    """Fill the node to `size` pods (the last PROBE + READY of them measured), then the floor."""
    if not ctx.pods.live:  # each namespace's first pod makes its switch and router port: untimed
        for pod in ctx.pods.make(NAMESPACES):
            ctx.pods.add(pod)
    fill = size - len(ctx.pods.live) - PROBE - READY
    if fill > 0:
        with ThreadPoolExecutor(CONC) as ex:
            list(ex.map(ctx.pods.add, ctx.pods.make(fill)))
    before, log_at = sample(ctx.labels), len(_agent_log(ctx.node))
    add_ms, ours = _timed_adds(ctx, PROBE)
    ctx.phases[size] = phase_medians(_agent_log(ctx.node)[log_at:])
    used = cpu.per_pod_ms(before, sample(ctx.labels), PROBE)
    ready = _ready(ctx, READY)
    rss = _agent_rss_mb(ctx.node)
    floor = _floor(ctx, size)
    ctx.runs[size] = (ours, floor)
    e = ctx.node.endpoints
    return {
        "pods": float(len(ctx.pods.live)),
        "ADD p50 ms": statistics.median(add_ms),
        "ADD p99 ms": pct(add_ms, 99),
        "pods/s (ADDs at 8)": ours.per_s,
        "ready p50 ms": statistics.median(ready) if ready else float("nan"),
        "ready p99 ms": pct(ready, 99),
        "agent RSS MB": rss,
        "agent RSS KB/pod over empty": (rss - ctx.rss0) * 1024 / len(ctx.pods.live),
        "agent CPU ms/pod": used.get("prismnet-agent", 0.0),
        "northd CPU ms/change": used.get("ovn-northd", 0.0),
        "ovn-controller CPU ms/pod": used.get("ovn-controller", 0.0),
        "NB KB": _db_kb(ctx.node, "nb.db"),
        "SB KB": _db_kb(ctx.node, "sb.db"),
        "SB Logical_Flow rows": float(_rows(e["OVN_SB_DB"], "OVN_Southbound", "Logical_Flow")),
        "floor p50 ms": pct(floor.total, 50),
        "floor p99 ms": pct(floor.total, 99),
        "floor ports/s": floor.per_s,
        "ours stage-p99 " + ours.p99_stage(): ours.slowest.get(ours.p99_stage(), float("nan")),
        "floor stage-p99 " + floor.p99_stage(): floor.slowest.get(floor.p99_stage(), float("nan")),
    }


def frame_step(ctx: Any, size: int) -> Row:
    """`step` for `make bench BENCH=scale`'s frame (its context has a `state` dict): the pods curve
    runs on a private node of its own, made at the first size and removed after the largest one
    within SCALE_MAX (or when a step fails)."""
    stack: ExitStack | None = ctx.state.get("pods")
    if stack is None:
        stack = ctx.state["pods"] = ExitStack()
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="cnis-", dir="/tmp"))
        ctx.state["pods_ctx"] = stack.enter_context(pods_context(Path(tmp)))
    try:
        row = step(ctx.state["pods_ctx"], size)
    except BaseException:
        stack.close()
        raise
    largest = max((s for s in SIZES if s <= int(os.environ.get("SCALE_MAX", "1000"))), default=0)
    if size >= largest:
        stack.close()
    print(stages_line(size, row))
    return numbers(row)


CURVE = Curve("pods", SIZES, frame_step, {"agent RSS MB": 1.2, "agent CPU ms/pod": 0.2})
"""In `make bench BENCH=scale` (SCALE_CURVES=pods): it needs /tmp/k8shost-ovn.lock as well (its node
runs in the machine's own namespace), which bench_scale takes, before the cluster lock, for it."""


STAGES = ("ours stage", "floor stage")
"""Row keys naming the stage that holds each p99 (the name is in the key): printed, not tabled."""


def numbers(row: Row) -> Row:
    """The row without its stage keys (their names change between sizes)."""
    return {k: v for k, v in row.items() if not k.startswith(STAGES)}


def stages_line(size: int, row: Row) -> str:
    return f"  at {size}: " + "; ".join(f"{k} {v:.0f} ms" for k, v in row.items() if k.startswith(STAGES))


def sizes_from(text: str, scale_max: int) -> list[int]:
    return sizes_within([int(x) for x in text.split(",") if x.strip()], scale_max)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.scale.pods", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        default=os.environ.get("SCALE_PODS_SIZES", ",".join(map(str, SIZES))),
        help="pods per node to step through (env SCALE_PODS_SIZES)",
    )
    ap.add_argument(
        "--scale-max",
        type=int,
        default=int(os.environ.get("SCALE_MAX", "1000")),
        help="largest size run (env SCALE_MAX)",
    )
    args = ap.parse_args(argv)
    if os.geteuid() != 0 or missing_prerequisites():
        print("bench.scale.pods needs root and OVS/OVN (make setup)")
        return
    sizes = sizes_from(args.sizes, args.scale_max)
    print(f"  pods per node {sizes}: {PROBE} ADDs at concurrency {CONC} + {READY} ready probes per size;")
    print(
        f"  the IDL floor: {PROBE} ports at concurrency {CONC} with the size present (2-core machine, shared)"
    )
    rows: dict[int, Row] = {}
    with tempfile.TemporaryDirectory(prefix="cnis-", dir="/tmp") as d, pods_context(Path(d)) as ctx:
        for s in sizes:
            t0 = time.perf_counter()
            rows[s] = step(ctx, s)
            ours, floor = ctx.runs[s]
            print(f"  size {s} ({time.perf_counter() - t0:.0f} s):")
            print_beside([("ours (prismnet ADD)", ours), ("floor (IDL, group commit)", floor)])
            print(f"    the agent's own medians (ms): {ctx.phases[s]}")
        print(table(CURVE, {s: numbers(r) for s, r in rows.items()}))  # before the teardown's DELs
        for s, r in rows.items():
            print(stages_line(s, r))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
