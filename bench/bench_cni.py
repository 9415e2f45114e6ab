"""PrismNET CNI benchmark: the real `prismnet` executable vs Debian's reference bridge + host-local.

Both plugins are driven by the same harness (nodeenv.cni_component.CniRuntime, i.e. what
containerd does: exec per call, netconf on stdin) in the same run, on a private node
environment (its own OVS/OVN, bridge `br-cnibench`). Printed, never asserted:

- ADD / CHECK / DEL latency (median, p95, p99), sequential and at concurrency 8
- pods/second for 100 pod ADDs at concurrency 8
- network-ready latency: ADD start until an ICMP echo from the pod to its gateway returns
- port-up wait alone (ours): bind committed and host end created -> ovn-installed seen,
  from the agent's per-ADD log
- after each run an invariant check (IPAM vs OVS ports vs NB ports vs kernel links)
- CPU per pod by process during the concurrency-8 ADDs (bench/cpu.py), both plugins
- floors (bench/cni_floor.py): the executable's start-up and OVN's own binding of a port with
  no agent at all, set against the ADD target; and the OVS/OVN daemons' CPU per pod against
  the reference's whole CPU per pod

`python -m bench.bench_cni --faults 10000` adds the fault-injection run (concurrency 32:
agent killed mid-ADD, netns deleted before DEL, double DEL, DEL without ADD, ADD retried).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import cpu
from bench.cni_density_run import DensityArgs, run_density
from bench.cni_floor import RawOvsdb, binding_floor, executable_floor, ids_have
from bench.cni_runtime import per_call_vs_batch, podman_start
from bench.stats import pct
from cni.ovn_egress import pods_set_name
from nodeenv.cni_component import CniComponent, CniRuntime
from nodeenv.daemons import stop
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_stack import OvnStack, missing_prerequisites

CLUSTER = "10.95.0.0/16"
REF_SUBNET, REF_BRIDGE = "10.94.0.0/16", "cnibr-bench"
ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME={}"
MAX_LIVE = 150


def fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (
        f"median {statistics.median(values):7.1f} ms  p95 {pct(values, 95):7.1f} ms  "
        f"p99 {pct(values, 99):7.1f} ms  (n={len(values)})"
    )


@dataclass
class Plugin:
    name: str
    runtime: CniRuntime
    invariants: Callable[[set[str]], list[str]]
    gateway: str
    live: dict[str, tuple[str, dict[str, object]]] = field(default_factory=dict)  # cid -> (netns, result)
    seq: int = 0

    def new_pod(self) -> tuple[str, str]:
        self.seq += 1
        name = f"cnib-{os.getpid()}-{self.name[:3]}{self.seq}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        return name, f"{self.name[:3]}{os.getpid()}x{self.seq:05d}" + "0" * 16

    def add(self, netns: str, cid: str) -> float:
        t0 = time.perf_counter()
        call = self.runtime.add(cid, f"/run/netns/{netns}", args=ARGS.format(cid[:12]))
        ms = (time.perf_counter() - t0) * 1000
        if call.rc:
            raise RuntimeError(f"{self.name} ADD failed: {call.out} {call.stderr}")
        self.live[cid] = (netns, call.out)
        return ms

    def check(self, cid: str) -> float:
        netns, result = self.live[cid]
        t0 = time.perf_counter()
        call = self.runtime.check(cid, f"/run/netns/{netns}", result, args=ARGS.format(cid[:12]))
        if call.rc:
            raise RuntimeError(f"{self.name} CHECK failed: {call.out}")
        return (time.perf_counter() - t0) * 1000

    def delete(self, cid: str) -> float:
        netns, result = self.live.pop(cid)
        t0 = time.perf_counter()
        call = self.runtime.delete(cid, f"/run/netns/{netns}", result, args=ARGS.format(cid[:12]))
        ms = (time.perf_counter() - t0) * 1000
        if call.rc:
            raise RuntimeError(f"{self.name} DEL failed: {call.out}")
        subprocess.run(["ip", "netns", "del", netns], check=False)
        return ms


Phase = dict[str, Any]
"""ADD/CHECK/DEL: latencies (ms); pods_per_s; cpu: CPU ms per pod by process during the ADDs."""


def run_phase(plugin: Plugin, n: int, conc: int) -> Phase:
    pods = [plugin.new_pod() for _ in range(n)]
    with ThreadPoolExecutor(conc) as ex:
        before = cpu.sample()
        t0 = time.perf_counter()
        adds = list(ex.map(lambda p: plugin.add(*p), pods))
        wall = time.perf_counter() - t0
        used = cpu.per_pod_ms(before, cpu.sample(), n)
        checks = list(ex.map(plugin.check, [cid for _, cid in pods]))
        dels = list(ex.map(plugin.delete, [cid for _, cid in pods]))
    return {"ADD": adds, "CHECK": checks, "DEL": dels, "pods_per_s": n / wall, "cpu": used}


def _setns(fd: int) -> None:
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def icmp_socket(netns: str) -> socket.socket:
    own, target = (
        os.open("/proc/thread-self/ns/net", os.O_RDONLY),
        os.open(f"/run/netns/{netns}", os.O_RDONLY),
    )
    try:
        _setns(target)
        try:
            return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)


def _checksum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def ping_until(sock: socket.socket, dst: str, timeout: float = 5.0) -> bool:
    ident, deadline, seq = os.getpid() & 0xFFFF, time.monotonic() + timeout, 0
    sock.settimeout(0.005)
    while time.monotonic() < deadline:
        seq += 1
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        sock.sendto(
            struct.pack("!BBHHH", 8, 0, _checksum(hdr + b"prismnet"), ident, seq) + b"prismnet", (dst, 0)
        )
        end = time.monotonic() + 0.01
        while time.monotonic() < end:
            try:
                data, addr = sock.recvfrom(2048)
            except (TimeoutError, BlockingIOError):
                continue
            if addr[0] == dst and data[20] == 0 and struct.unpack("!H", data[24:26])[0] == ident:
                return True
    return False


def network_ready(plugin: Plugin, n: int) -> list[float]:
    out = []
    for _ in range(n):
        netns, cid = plugin.new_pod()
        sock = icmp_socket(netns)
        t0 = time.perf_counter()
        plugin.add(netns, cid)
        gw = plugin.gateway or str(plugin.live[cid][1]["ips"][0]["gateway"])  # type: ignore[index]
        ok = ping_until(sock, gw)
        ms = (time.perf_counter() - t0) * 1000
        sock.close()
        plugin.delete(cid)
        if ok:
            out.append(ms)
    return out


def _lines(argv: list[str]) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()


def ours_invariants(node: Node) -> Callable[[set[str]], list[str]]:
    e = node.endpoints

    def check(live: set[str]) -> list[str]:
        nb = [
            "ovn-nbctl",
            f"--db={e['OVN_NB_DB']}",
            "--bare",
            "--columns=external_ids,addresses",
            "find",
            "Logical_Switch_Port",
            "external_ids:prismnet.network=prismnet",
        ]
        rows = subprocess.run(nb, capture_output=True, text=True, check=True).stdout.strip().split("\n\n")
        nb_cids, ips = set(), []
        for row in filter(None, rows):
            nb_cids |= {w.split("=", 1)[1] for w in row.split() if w.startswith("prismnet.container-id=")}
            ips += [w for w in row.split() if w.count(".") == 3 and "=" not in w]
        ovs = _lines(
            [
                "ovs-vsctl",
                f"--db={e['OVS_DB']}",
                "--bare",
                "--columns=external_ids",
                "find",
                "Interface",
                "external_ids:prismnet.network=prismnet",
            ]
        )
        ovs_cids = {w.split("=", 1)[1] for w in ovs if w.startswith("prismnet.container-id=")}
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        k_cids = {w.split("/")[1] for w in links.split() if w.startswith("prismnet:prismnet/")}
        problems = _compare({"NB ports": nb_cids, "OVS ports": ovs_cids, "kernel links": k_cids}, live, ips)
        egress = _lines(
            ["ovn-nbctl", f"--db={e['OVN_NB_DB']}", "--bare", "--columns=addresses", "find", "Address_Set",
             f"name={pods_set_name(e['OVN_CHASSIS'])}"]
        )  # fmt: skip
        if sorted(egress) != sorted(ips):
            problems.append(f"egress address set {sorted(set(egress) ^ set(ips))[:3]} differs from the pods")
        return problems

    return check


def ref_invariants(data_dir: Path) -> Callable[[set[str]], list[str]]:
    def check(live: set[str]) -> list[str]:
        held = (
            [p for p in (data_dir / "refbench").glob("*") if p.name[0].isdigit()] if data_dir.exists() else []
        )
        owners = {p.read_text().split()[0] for p in held}
        veths = subprocess.run(
            ["ip", "-o", "link", "show", "master", REF_BRIDGE], capture_output=True, text=True
        )
        n_veth = len(veths.stdout.splitlines())
        problems = _compare({"host-local": owners}, live, [p.name for p in held])
        return problems + (
            [f"{n_veth} veths on {REF_BRIDGE}, {len(live)} pods"] if n_veth != len(live) else []
        )

    return check


def _compare(sources: dict[str, set[str]], live: set[str], ips: list[str]) -> list[str]:
    out = [
        f"{k}: leaked {sorted(v - live)[:3]} missing {sorted(live - v)[:3]}"
        for k, v in sources.items()
        if v != live
    ]
    if len(ips) != len(set(ips)):
        out.append(f"duplicate IPs: {sorted({i for i in ips if ips.count(i) > 1})}")
    return out


@contextmanager
def bench_node(tmp: Path, bridge: str = "br-cnibench", system_id: str = "cni-bench") -> Iterator[Node]:
    settings = NodeSettings(
        run_dir=tmp / "node", bridge=bridge, system_id=system_id, install_root=tmp / "root"
    )
    node = Node(settings, [OvnStack(), CniComponent(cluster_cidr=CLUSTER)])
    node.up()
    try:
        yield node
    finally:
        node.down()
        subprocess.run(["ip", "link", "del", REF_BRIDGE], capture_output=True)
        for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
            if name.startswith(
                tuple(f"{p}-{os.getpid()}-" for p in ("cnib", "cnid", "cnif"))
            ):  # interrupted run
                subprocess.run(["ip", "netns", "del", name], capture_output=True)


class InstalledMonitor:
    """An independent OVSDB monitor (raw JSON-RPC, no ovsdbapp) noting when each Interface gets
    external_ids:ovn-installed=true, on CLOCK_MONOTONIC like the agent's own timestamps.

    ovsdb-server pushes an update to every monitoring client when ovn-controller commits the
    key, so (agent saw it) - (this client saw it) is the agent's detection lag; a poller's would
    be up to its polling interval."""

    def __init__(self, remote: str) -> None:
        self._db = RawOvsdb(remote, "Open_vSwitch", {"Interface": ["name", "external_ids"]})

    @property
    def seen(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for at, _, row in list(self._db.events):
            if row.get("name") not in out and ids_have(row, "ovn-installed", "true"):
                out[row["name"]] = at
        return out

    def close(self) -> None:
        self._db.close()


def detection_lag(node: Node, monitor: InstalledMonitor) -> list[float]:
    out, seen = [], monitor.seen
    for line in (node.run_dir / "prismnet" / "agent.log").read_text().splitlines():
        if '"installed_seen_at"' in line:
            rec = json.loads(line)
            if rec.get("host_if") in seen:
                out.append((float(rec["installed_seen_at"]) - seen[rec["host_if"]]) * 1000)
    return out


def port_up_from_log(node: Node) -> list[float]:
    out = []
    for line in (node.run_dir / "prismnet" / "agent.log").read_text().splitlines():
        if '"port_up_ms"' in line:
            out.append(float(json.loads(line)["port_up_ms"]))
    return out


def _agent_log(node: Node) -> list[str]:
    return (node.run_dir / "prismnet" / "agent.log").read_text().splitlines()


def phase_medians(lines: list[str]) -> str:
    """Median of each per-phase timing the agent logs with its ADD/DEL lines."""
    by_cmd: dict[str, dict[str, list[float]]] = {}
    for line in lines:
        if '"total_ms"' not in line:
            continue
        rec = json.loads(line)
        phases = by_cmd.setdefault(str(rec.get("cmd", "?")), {})
        for k, v in rec.items():
            if k.endswith("_ms"):
                phases.setdefault(k, []).append(float(v))
    return "; ".join(
        f"{cmd}: " + " ".join(f"{k[:-3]} {statistics.median(v):.1f}" for k, v in phases.items())
        for cmd, phases in sorted(by_cmd.items())
    )


def plugins(node: Node, tmp: Path) -> tuple[Plugin, Plugin]:
    e = node.endpoints
    ours_conf = json.loads(Path(e["PRISMNET_CNI_CONFLIST"]).read_text())
    ours_conf["plugins"] = ours_conf["plugins"][:1]
    ours = Plugin(
        "prismnet",
        CniRuntime(ours_conf, [str(Path(e["PRISMNET_CNI_BIN"]).parent)], {}),  # agentSocket: the conflist
        ours_invariants(node),
        "",
    )
    ref_conf = {
        "cniVersion": "1.0.0",
        "name": "refbench",
        "plugins": [
            {
                "type": "bridge",
                "bridge": REF_BRIDGE,
                "isGateway": True,
                "mtu": 1400,
                "ipam": {"type": "host-local", "subnet": REF_SUBNET, "dataDir": str(tmp / "hl")},
            }
        ],
    }
    ref = Plugin(
        "bridge+host-local",
        CniRuntime(ref_conf, ["/usr/lib/cni"], {}),
        ref_invariants(tmp / "hl"),
        "10.94.0.1",
    )
    return ours, ref


def report(plugin: Plugin, label: str, phase: Phase) -> None:
    print(f"  {plugin.name:18s} {label}")
    for verb in ("ADD", "CHECK", "DEL"):
        print(f"    {verb:5s} {fmt(phase[verb])}")
    if label.startswith("concurrency"):
        print(f"    throughput {phase['pods_per_s']:.1f} pods/s")
        cpu_ms = sorted(phase["cpu"].items(), key=lambda kv: -kv[1])
        print(f"    CPU per pod during the ADDs: {sum(v for _, v in cpu_ms):.1f} ms = ", end="")
        print(" + ".join(f"{k} {v:.1f}" for k, v in cpu_ms if v >= 0.05))
    problems = plugin.invariants(set(plugin.live))
    print(f"    invariants: {problems if problems else 'OK (nothing leaked or duplicated)'}")


def latency_runs(node: Node, ours: Plugin, ref: Plugin, args: argparse.Namespace) -> dict[str, Phase]:
    """Sequential and concurrency-8 phases of both plugins, keyed 'seq <name>' / 'c8 <name>'."""
    phases = {}
    for p in (ref, ours):  # warm-up: first namespace switch, page cache
        report(p, "warm-up (5 pods)", run_phase(p, 5, 1))
    for key, label, n, conc in (
        ("seq", f"sequential ({args.seq} pods)", args.seq, 1),
        ("c8", f"concurrency 8 ({args.pods} pods)", args.pods, 8),
    ):
        for p in (ref, ours):
            before = len(_agent_log(node))
            phases[f"{key} {p.name}"] = phase = run_phase(p, n, conc)
            report(p, label, phase)
            if p is ours:
                print(f"    agent-side medians (ms): {phase_medians(_agent_log(node)[before:])}")
    for p in (ref, ours):
        ready = network_ready(p, args.ready)
        print(f"  {p.name:18s} network ready (ADD start -> ICMP reply from gateway): {fmt(ready)}")
    port_up = fmt(port_up_from_log(node))
    print(f"  {'prismnet':18s} port-up wait (bound + veth made -> ovn-installed seen), all ADDs: {port_up}")
    return phases


def floors(node: Node, ours: Plugin, ref: Plugin, phases: dict[str, Phase], seq: int) -> None:
    """What no agent can beat here, against the targets (see bench/cni_floor.py)."""
    e = node.endpoints
    print("  floors: what an ADD costs here before the agent does any work")
    exe = executable_floor(Path(e["PRISMNET_CNI_BIN"]), e["PRISMNET_AGENT_SOCKET"])
    for what, ms in exe.items():
        print(f"    {what:58s} median {ms:6.1f} ms")
    print("    OVN binding with no agent (veth made beforehand; raw OVSDB; ms from the first commit):")
    installed = {}
    for present in sorted({0, seq // 2, 100}):
        pods = [ours.new_pod() for _ in range(present)]
        try:
            for netns, cid in pods:
                ours.add(netns, cid)
            binding = binding_floor(e, "k8s-bench", e["OVS_BRIDGE"])
        finally:
            for _, cid in pods:
                ours.delete(cid)
        installed[present] = binding.median("ovn-installed")
        print(f"     with {present} pods present:")
        for what, values in binding.milestones.items():
            print(f"      {what:30s} {fmt(values)}")
    if f"seq {ref.name}" not in phases:
        return
    target = 1.5 * statistics.median(phases[f"seq {ref.name}"]["ADD"])
    shim, typical = exe["prismnet STATUS (start-up + agent round trip)"], installed[seq // 2]
    print(
        f"    ADD target (1.5 x reference median) {target:.1f} ms; floor at {seq // 2} pods present (the"
        f" sequential run's median) = prismnet STATUS {shim:.1f} ms + OVN binding {typical:.1f} ms"
        f" = {shim + typical:.1f} ms ({'below' if shim + typical < target else 'ABOVE'} the target)"
    )
    ours_cpu, ref_cpu = phases[f"c8 {ours.name}"]["cpu"], phases[f"c8 {ref.name}"]["cpu"]
    ovn = sum(v for k, v in ours_cpu.items() if k.startswith(("ovs", "ovn")))
    print(
        f"    throughput: OVS/OVN daemons alone spend {ovn:.1f} ms CPU per pod (ours);"
        f" the reference spends {sum(ref_cpu.values()):.1f} ms CPU per pod in all"
    )


def density_args(args: argparse.Namespace) -> DensityArgs:
    return DensityArgs(pods=args.density, conc=args.density_conc, fill=args.density_fill)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_cni")
    ap.add_argument("--seq", type=int, default=50, help="pods in the sequential run")
    ap.add_argument("--pods", type=int, default=100, help="pods in the concurrency-8 run")
    ap.add_argument("--ready", type=int, default=20, help="pods in the network-ready run")
    ap.add_argument("--runtime-pods", type=int, default=20, help="pods per variant of the runtime path")
    ap.add_argument("--runtime-only", action="store_true", help="only the runtime path (per call, podman)")
    ap.add_argument("--faults", type=int, default=0, help="operations in the fault-injection run (0: skip)")
    ap.add_argument("--faults-only", action="store_true", help="skip the latency runs")
    ap.add_argument(
        "--density", type=int, default=100, help="pods per density batch (0: skip the density run)"
    )
    ap.add_argument("--density-conc", type=int, default=8, help="concurrency of the density batches")
    ap.add_argument("--density-fill", type=int, default=300, help="pods the density run fills the node to")
    ap.add_argument("--density-only", action="store_true", help="only the density run")
    args = ap.parse_args(argv or [])
    if os.geteuid() != 0 or missing_prerequisites():
        print("bench_cni needs root and OVS/OVN (make setup)")
        return
    with tempfile.TemporaryDirectory(prefix="cnib-", dir="/tmp") as d, bench_node(Path(d)) as node:
        ours, ref = plugins(node, Path(d))
        monitor = InstalledMonitor(node.endpoints["OVS_DB"])
        if args.density_only:
            run_density(node, ours.runtime, ref.runtime, density_args(args))
        elif args.runtime_only:
            per_call_vs_batch(node, ours.runtime, ref.runtime, args.runtime_pods)
            podman_start(node, ref.runtime.conflist, Path(d), args.runtime_pods)
        elif not args.faults_only:
            phases = latency_runs(node, ours, ref, args)
            lag = fmt(detection_lag(node, monitor))
            print(f"  {'prismnet':18s} ovn-installed seen: agent minus an independent OVSDB monitor: {lag}")
            floors(node, ours, ref, phases, args.seq)
            per_call_vs_batch(node, ours.runtime, ref.runtime, args.runtime_pods)
            podman_start(node, ref.runtime.conflist, Path(d), args.runtime_pods)
            if args.density:
                run_density(node, ours.runtime, ref.runtime, density_args(args))
        monitor.close()
        if args.faults:
            fault_run(node, ours, args.faults)


class FaultRun:
    """Random ADD/DEL traffic at concurrency 32 with faults; what a kubelet would do on errors."""

    def __init__(self, node: Node, plugin: Plugin, seed: int = 7) -> None:
        self.node, self.p, self.rng = node, plugin, random.Random(seed)
        self.lock, self.restart_lock = threading.Lock(), threading.Lock()
        self.live: dict[str, str] = {}  # cid -> netns (ADD succeeded, not deleted)
        self.gone: list[tuple[str, str]] = []
        self.counts: dict[str, int] = {}
        self.unexpected: list[str] = []

    def _count(self, what: str) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def _call(self, fn: Callable[[], object]) -> object:
        """Retry while the agent is away (code 11), as kubelet does; anything else is recorded."""
        for _ in range(200):
            call = fn()
            if call.rc == 0 or call.out.get("code") != 11:  # type: ignore[attr-defined]
                return call
            self._count("retried: agent unreachable")
            time.sleep(0.1)
        return call

    def op(self, i: int) -> None:
        try:
            self._op()
        except Exception as e:  # recorded and reported, the run goes on
            self.unexpected.append(f"op {i}: {type(e).__name__}: {e}")

    def _op(self) -> None:
        r = self.rng.random()
        with self.lock:
            live = list(self.live.items())
            gone = self.gone[-50:]
        if r < 0.004:
            return self.kill_agent()
        if not live or (r < 0.45 and len(live) < MAX_LIVE):  # a /24 namespace holds 252 pods
            return self.add()
        cid, netns = self.rng.choice(live)
        if r < 0.75:
            return self.delete(cid, netns, "DEL", remove_netns_first=False)
        if r < 0.85:
            return self.delete(cid, netns, "DEL after netns deleted", remove_netns_first=True)
        if r < 0.92:
            return self.retry_add(cid, netns)
        if r < 0.96 and gone:
            c, n = self.rng.choice(gone)
            return self._expect_ok(
                "double DEL",
                lambda: self.p.runtime.delete(c, f"/run/netns/{n}", None, args=ARGS.format(c[:12])),
            )
        c = f"never{self.rng.getrandbits(48):x}" + "0" * 8
        return self._expect_ok(
            "DEL without ADD", lambda: self.p.runtime.delete(c, "", None, args=ARGS.format(c[:12]))
        )

    def _expect_ok(self, what: str, fn: Callable[[], object]) -> None:
        call = self._call(fn)
        self._count(what)
        if call.rc:  # type: ignore[attr-defined]
            self.unexpected.append(f"{what}: {call.out}")  # type: ignore[attr-defined]

    def add(self) -> None:
        with self.lock:
            netns, cid = self.p.new_pod()
        call = self._call(lambda: self.p.runtime.add(cid, f"/run/netns/{netns}", args=ARGS.format(cid[:12])))
        self._count("ADD")
        if call.rc == 0:  # type: ignore[attr-defined]
            with self.lock:
                self.live[cid] = netns
            return
        self._count("ADD failed (then DEL)")
        self._expect_ok(
            "DEL after failed ADD",
            lambda: self.p.runtime.delete(cid, f"/run/netns/{netns}", None, args=ARGS.format(cid[:12])),
        )
        subprocess.run(["ip", "netns", "del", netns], check=False)

    def retry_add(self, cid: str, netns: str) -> None:
        with self.lock:
            if self.live.get(cid) != netns:
                return
            del self.live[cid]  # no concurrent DEL of it meanwhile
        self._expect_ok(
            "ADD retried, same container id",
            lambda: self.p.runtime.add(cid, f"/run/netns/{netns}", args=ARGS.format(cid[:12])),
        )
        with self.lock:
            self.live[cid] = netns

    def delete(self, cid: str, netns: str, what: str, remove_netns_first: bool) -> None:
        with self.lock:
            if self.live.pop(cid, None) is None:
                return
        if remove_netns_first:
            subprocess.run(["ip", "netns", "del", netns], check=False)
        self._expect_ok(
            what, lambda: self.p.runtime.delete(cid, f"/run/netns/{netns}", None, args=ARGS.format(cid[:12]))
        )
        subprocess.run(["ip", "netns", "del", netns], check=False, capture_output=True)
        with self.lock:
            self.gone.append((cid, netns))

    def kill_agent(self) -> None:
        if not self.restart_lock.acquire(blocking=False):
            return
        try:
            for rec in self.node.daemons.load():
                if rec.name == "prismnet-agent":
                    os.kill(rec.pid, 9)
                    stop(rec, timeout=5)
            self.node.endpoints.update(
                next(c for c in self.node.components if isinstance(c, CniComponent)).start(self.node)
            )
            self._count("agent killed mid-flight")
        finally:
            self.restart_lock.release()

    def finish(self) -> list[str]:
        for cid, netns in list(self.live.items()):
            self.delete(cid, netns, "final DEL", remove_netns_first=False)
        return self.p.invariants(set())


def fault_run(node: Node, plugin: Plugin, n: int) -> None:
    run = FaultRun(node, plugin)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(32) as ex:
        list(ex.map(run.op, range(n)))
    problems = run.finish()
    print(f"  fault injection: {n} operations at concurrency 32 in {time.perf_counter() - t0:.0f} s")
    for what, k in sorted(run.counts.items()):
        print(f"    {what:36s} {k}")
    print(f"    unexpected failures: {len(run.unexpected)} {run.unexpected[:3]}")
    print(f"    invariants after final DELs: {problems if problems else 'OK (nothing leaked or duplicated)'}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
