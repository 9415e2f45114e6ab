"""The runtime path of the CNI bench (`make bench BENCH=cni`), printed beside the in-process figures.

1. Per call, as a runtime drives a plugin: sequential pods, each in a fresh netns, ADD then DEL
   before the next pod, every plugin a process of its own. Measured in variants that take one
   difference at a time away from the CNI bench's batch mode (all netns first, all ADDs, then
   all DELs, prismnet alone): the installed conflist's chained portmap, the DEL of the previous
   pod still being processed by OVN, and the executable's own start-up.
2. Container start: `podman run --rm <image> true` (Debian's podman 4.3, CNI backend, private
   config and storage) on our network, on Debian's bridge + host-local conflist and with no
   network at all, median of 20 each, in the same run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.cni_component import CniCall, CniRuntime
from nodeenv.node import Node
from nodeenv.podman_runtime import IMAGE, make_podman, missing_prerequisites
from nodeenv.portmap_chains import nat_chains, remove_new_chains

ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME={}"
BRIDGE = Path("/usr/lib/cni/bridge")


def _version_ms(exe: Path, n: int) -> float:
    env, conf = {"PATH": "/usr/bin:/bin", "CNI_COMMAND": "VERSION"}, b'{"cniVersion":"1.0.0"}'
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([str(exe)], env=env, input=conf, capture_output=True, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return _median(times)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Cycle:
    """Per-pod figures of one variant (ms)."""

    add: list[float] = field(default_factory=list)
    first_plugin: list[float] = field(default_factory=list)
    chained: list[float] = field(default_factory=list)
    delete: list[float] = field(default_factory=list)
    agent: list[float] = field(default_factory=list)

    def record_add(self, t0: float, call: CniCall) -> None:
        self.add.append((time.perf_counter() - t0) * 1000)
        if call.rc:
            raise RuntimeError(f"ADD: {call.out} {call.stderr}")
        self.first_plugin.append(call.plugin_ms[0])
        self.chained.append(sum(call.plugin_ms[1:]))


def _netns(tag: str, i: int) -> tuple[str, str]:
    name = f"cnir-{os.getpid()}-{tag}{i}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    return name, f"{tag}{os.getpid()}x{i:04d}".ljust(32, "0")


def _agent_adds(node: Node, since: int) -> list[dict[str, object]]:
    lines = (node.run_dir / "prismnet" / "agent.log").read_text().splitlines()[since:]
    recs = [json.loads(line) for line in lines if '"total_ms"' in line]
    return [r for r in recs if r.get("cmd") == "ADD"]


def _log_len(node: Node) -> int:
    return len((node.run_dir / "prismnet" / "agent.log").read_text().splitlines())


def one_pod(rt: CniRuntime, out: Cycle, tag: str, i: int, pause: float = 0.0) -> None:
    """Fresh netns, ADD, DEL, netns gone (then `pause` seconds)."""
    name, cid = _netns(tag, i)
    t0 = time.perf_counter()
    call = rt.add(cid, f"/run/netns/{name}", args=ARGS.format(tag))
    out.record_add(t0, call)
    t0 = time.perf_counter()
    rt.delete(cid, f"/run/netns/{name}", call.out, args=ARGS.format(tag))
    out.delete.append((time.perf_counter() - t0) * 1000)
    subprocess.run(["ip", "netns", "del", name], check=True)
    time.sleep(pause)


def batch(rt: CniRuntime, n: int, tag: str) -> Cycle:
    """The CNI bench's sequential mode: every netns first, every ADD, then every DEL."""
    out, pods = Cycle(), [_netns(tag, i) for i in range(n)]
    results = []
    for name, cid in pods:
        t0 = time.perf_counter()
        call = rt.add(cid, f"/run/netns/{name}", args=ARGS.format(tag))
        out.record_add(t0, call)
        results.append(call.out)
    for (name, cid), result in zip(pods, results, strict=True):
        rt.delete(cid, f"/run/netns/{name}", result, args=ARGS.format(tag))
        subprocess.run(["ip", "netns", "del", name], check=True)
    return out


def per_call_vs_batch(node: Node, ours: CniRuntime, ref: CniRuntime, n: int = 20) -> None:
    """Ours against the reference, driver by driver, and where the per-call driver's time goes."""
    conflist = json.loads(Path(node.endpoints["PRISMNET_CNI_CONFLIST"]).read_text())
    installed = CniRuntime(conflist, [*ours.cni_path, "/usr/lib/cni"], {})
    got = {BATCH_REF: batch(ref, n, "rb")}
    since = _log_len(node)
    got[BATCH_OURS] = batch(ours, n, "ob")
    got[BATCH_OURS].agent = [float(str(r["total_ms"])) for r in _agent_adds(node, since)]
    per_pod = {
        PER_POD_REF: (ref, 0.0),
        PER_POD_OURS: (ours, 0.0),
        SETTLED: (ours, 0.3),
        INSTALLED: (installed, 0.0),
    }
    got |= {label: Cycle() for label in per_pod}
    for i in range(n):  # interleaved: drift on this shared machine hits every variant alike
        for k, (label, (rt, pause)) in enumerate(per_pod.items()):
            since = _log_len(node)
            one_pod(rt, got[label], f"p{k}", i, pause)
            got[label].agent += [float(str(r["total_ms"])) for r in _agent_adds(node, since)]
    print(f"  driven per call (a process per plugin call, sequential, medians of {n} pods, ms):")
    print(f"    {'':50s} {'ADD':>6s} {'agent':>6s} {'exe':>6s} {'chain':>6s} {'harn.':>6s} {'DEL':>6s}")
    for label, c in got.items():
        print(f"    {label:50s} {_row(c)}")
    print("      (agent: the agent's own time per ADD, from its log; exe: the first plugin's process"
          " minus that; chain: the plugins after it; harn.: the driver's JSON and spawning)")  # fmt: skip
    m = {k: _median(v.add) for k, v in got.items()}
    print(f"    ours / reference: batch (the CNI bench) {m[BATCH_OURS] / m[BATCH_REF]:.1f}x,"
          f" per pod {m[PER_POD_OURS] / m[PER_POD_REF]:.1f}x,"
          f" per pod with the installed conflist {m[INSTALLED] / m[PER_POD_REF]:.1f}x")  # fmt: skip


BATCH_REF, BATCH_OURS = "batch (CNI bench): reference", "batch (CNI bench): prismnet alone"
PER_POD_REF, PER_POD_OURS = "per pod: reference", "per pod: prismnet alone"
SETTLED = "per pod: prismnet alone, 300 ms pause after each DEL"
INSTALLED = "per pod: installed conflist (prismnet + portmap)"


def _row(c: Cycle) -> str:
    agent = _median(c.agent) if c.agent else 0.0
    exe = _median([f - a for f, a in zip(c.first_plugin, c.agent, strict=True)]) if c.agent else 0.0
    harness = _median([a - f - ch for a, f, ch in zip(c.add, c.first_plugin, c.chained, strict=True)])
    cols = [_median(c.add), agent, exe, _median(c.chained), harness, _median(c.delete)]
    return " ".join(f"{v:6.1f}" if v == v and v else f"{'-':>6s}" for v in cols)


def podman_start(node: Node, ref_conflist: dict[str, object], work: Path, n: int = 20) -> None:
    """`podman run --rm <image> true`: our network vs bridge + host-local vs none, interleaved."""
    missing = missing_prerequisites()
    if missing:
        print(f"  podman run: skipped, prerequisites missing: {', '.join(missing)} (make setup)")
        return
    root = node.settings.install_root
    ref_file = root / "etc" / "cni" / "net.d" / "20-refbench.conflist"
    ref_file.write_text(json.dumps(ref_conflist))
    pm = make_podman(work / "podman", root, f"/k8shost-bench-{os.getpid()}")
    chains = nat_chains()
    try:
        pm.build_image()
        runs = {
            "no network (--network none)": ["--network", "none"],
            "reference (bridge + host-local)": ["--network", str(ref_conflist["name"])],
            "prismnet (installed conflist: prismnet + portmap)": ["--network", "prismnet"],
            "prismnet with -p 18095:80 (portmap doing work)": ["--network", "prismnet", "-p", "18095:80"],
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(n + 1):  # the first round warms up, not counted
            for label, args in runs.items():
                t0 = time.perf_counter()
                pm("run", "--rm", "--cgroup-parent", pm.cgroup_parent, *args, IMAGE, "true")
                times[label].append((time.perf_counter() - t0) * 1000)
        print(f"  container start, `podman run --rm <image> true` (podman 4.3, runc; median of {n}):")
        none = _median(times["no network (--network none)"][1:])
        for label, values in times.items():
            med = _median(values[1:])
            print(f"    {label:52s} median {med:6.1f} ms  (+{med - none:5.1f} ms over no network)")
        exe = Path(node.endpoints["PRISMNET_CNI_BIN"])
        version = {name: _version_ms(path, n) for name, path in (("prismnet", exe), ("bridge", BRIDGE))}
        print(f"    podman also asks VERSION of every plugin of the list once before ADD and once before DEL:"
              f" prismnet VERSION {version['prismnet']:.1f} ms (Python start-up), bridge VERSION"
              f" {version['bridge']:.1f} ms")  # fmt: skip
    finally:
        pm.remove_all()
        ref_file.unlink(missing_ok=True)
        remove_new_chains(chains)  # the -p run made portmap create its shared chains
