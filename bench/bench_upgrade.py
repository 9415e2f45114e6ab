"""A rolling upgrade of the whole suite under traffic (issue 29 item 1; docs/upgrade.md).

1. the image under a second tag (`python -m nodeenv.image retag`, the build cache: seconds);
2. a 3-node `make boot` of its own (prefix k8sup, run dir .run-bench-upgrade; or the booted one whose
   run dir UPGRADE_BENCH_BOOT_DIR names, left running);
3. traffic (bench/upgrade_workload.py, bench/upgrade_probe.py): long-lived TCP streams from a pod on
   node1 to echo pods on node2/node3 directly, through their ClusterIP and through their
   LoadBalancer IP; a DNS query from that pod every 100 ms; a pod writing its volume every second;
   a new pod every 5 s, round-robin over the nodes, deleted once Ready;
4. every StatefulSet, DaemonSet and Deployment of ours, one at a time, to the new tag as
   `kubectl set image` does (only the containers running our image), `kubectl rollout status` awaited.

Printed per component rolled (and for a quiet minute before, the baseline): connections reset
(target 0), DNS failures beyond one retry (target 0; waited for as a pod's resolver waits, 5 s a try;
answers after 1 s counted apart), longest stream stall and longest volume write
stall (target < 1 s), pod ADDs failed (FailedCreatePodSandBox Events; target 0), rollout time.

    make bench BENCH=upgrade  # the rolls 26 min at load 20-70 here, plus the boot; UPGRADE_BENCH_ONLY=...
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.upgrade_workload import NS, churn_pod, objects
from nodeenv.image.build import image_name
from nodeenv.image.retag import main as retag
from nodeenv.image.retag import tagged

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SYSTEM = "kube-system"
ORDER = (  # the order docs/upgrade.md gives the operator: the databases, the datapath, then the rest
    "statefulset/ovn-central", "daemonset/ovs-node", "daemonset/prismnet-agent",
    "daemonset/lightningstor-csi-node", "daemonset/iam-webhook",
    "deployment/fiberlb-controller", "deployment/flashdns-controller", "deployment/netpol-controller",
    "deployment/node-controller", "deployment/project-controller", "deployment/lightningstor-csi-controller",
)  # fmt: skip


OVS_NODE = "daemonset/ovs-node"
NETDEV_CUT = (
    "the userspace datapath (OVS_DATAPATH_TYPE netdev, no openvswitch module here) carries the node's "
    "own address on br-phy: the old pod's ovs-vswitchd stopping cuts the node from the API, so its "
    "kubelet never learns of the new pod (docs/upgrade.md)"
)
NETDEV_SHORT = "userspace datapath (netdev): the node's address is on br-phy, see above"


@dataclass
class Cluster:
    run_dir: Path

    def run(
        self, *args: str, stdin: str | None = None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        kubeconfig = self.run_dir / "kubeapi" / "admin.kubeconfig"
        return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 900) -> str:
        proc = self.run(*args, stdin=stdin, timeout=timeout)
        if proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))


def _boot_cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "nodeenv.kubelet", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@contextmanager
def booted() -> Iterator[Cluster]:
    given = os.environ.get("UPGRADE_BENCH_BOOT_DIR")
    if given:
        yield Cluster(Path(given))
        return
    prefix = os.environ.get("K8SHOST_CLUSTER_PREFIX", "k8sup")
    flags = ("--run-dir", str(ROOT / ".run-bench-upgrade"), "--netns-prefix", prefix)
    started = time.monotonic()
    wait_s = float(os.environ.get("K8SHOST_BOOT_TIMEOUT", "420"))  # more on a machine under load
    proc = _boot_cli("boot", *flags, "--nodes", "3", "--api-port", "0", "--timeout", f"{wait_s:.0f}",
                     timeout=wait_s + 300)  # fmt: skip
    if proc.returncode:
        _boot_cli("down", *flags, timeout=300)
        raise RuntimeError(f"boot exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"booted 3 nodes in {time.monotonic() - started:.0f} s", flush=True)
    try:
        yield Cluster(ROOT / ".run-bench-upgrade")
    finally:
        down = _boot_cli("down", *flags, timeout=300)
        print(f"boot down: exit {down.returncode}", flush=True)


def wait(what: str, check: Any, timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def _ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


@dataclass
class Churn:
    """A pod every `every` s, round-robin over the nodes, deleted once Ready; ADD failures from Events."""

    cluster: Cluster
    image: str
    every: float = 5.0
    created: dict[str, float] = field(default_factory=dict)
    ready_after: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        while not self._stop.wait(self.every):
            n += 1
            name = f"churn-{n}"
            doc = json.dumps(churn_pod(self.image, name, f"node{n % 3 + 1}"))
            if self.cluster.run("apply", "-f", "-", stdin=doc).returncode == 0:
                self.created[name] = time.time()
            self._reap()

    def _reap(self) -> None:
        items = self.cluster.get("-n", NS, "pods", "-l", "app=churn")["items"]
        done = [p["metadata"]["name"] for p in items if _ready(p)]
        for name in done:
            self.ready_after.setdefault(name, time.time() - self.created.get(name, time.time()))
        if done:
            self.cluster.run("-n", NS, "delete", "pod", "--wait=false", *done)

    def stop(self) -> None:
        self._stop.set()

    def add_failures(self) -> list[float]:
        """When each FailedCreatePodSandBox Event of a churn pod was last seen (kubelet's ADD failed)."""
        items = self.cluster.get("-n", NS, "events", "--field-selector", "reason=FailedCreatePodSandBox")[
            "items"
        ]
        return [_event_time(e) for e in items if e["involvedObject"]["name"].startswith("churn-")]


def liveness_kills(cluster: Cluster) -> list[tuple[float, str]]:
    """(when, pod/container) of each suite container its runner killed for a failed liveness probe (a
    machine under load times the probes out: an openvswitch killed so cuts its node's pods off, which
    is then in the row of whatever was rolling)."""
    items = cluster.get("-n", SYSTEM, "events", "--field-selector", "reason=Killing")["items"]
    return [(_event_time(e), f"{e['involvedObject']['name']}/{e['message'].split()[1]}") for e in items
            if "failed liveness probe" in e.get("message", "")]  # fmt: skip


def _event_time(e: dict[str, Any]) -> float:
    from datetime import datetime

    stamp = e.get("lastTimestamp") or e.get("eventTime") or e["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def set_image(cluster: Cluster, workload: str, old_repo: str, new: str) -> list[str]:
    """`kubectl set image` for the containers (and init containers) running our image."""
    spec = cluster.get("-n", SYSTEM, workload)["spec"]["template"]["spec"]
    ours = [c["name"] for c in (*spec.get("initContainers", []), *spec["containers"])
            if c["image"].rpartition(":")[0] == old_repo]  # fmt: skip
    cluster.kubectl("-n", SYSTEM, "set", "image", workload, *(f"{c}={new}" for c in ours))
    return ours


@dataclass
class Window:
    name: str
    start: float
    end: float = 0.0
    not_rolled: str = ""  # why this workload was left at its tag (a row saying so, not a silent skip)

    def holds(self, t: float) -> bool:
        return self.start <= t < (self.end or float("inf"))


def probe_argv(cluster: Cluster, client_uid: str) -> list[str]:
    svc = cluster.get("-n", NS, "service", "echo")

    def lb_ip() -> str | None:
        status = cluster.get("-n", NS, "service", "echo-lb").get("status") or {}
        ip = ((status.get("loadBalancer") or {}).get("ingress") or [{}])[0].get("ip")
        return str(ip) if ip else None

    lb = wait("echo-lb's LoadBalancer IP", lb_ip, 120)
    pods = {p["metadata"]["name"]: p for p in cluster.get("-n", NS, "pods")["items"]}
    dns = cluster.get("-n", SYSTEM, "service", "cluster-dns")["spec"]["clusterIP"]
    port = svc["spec"]["ports"][0]["port"]
    streams = [f"pod-node2={pods['echo-node2']['status']['podIP']}:{port}",
               f"pod-node3={pods['echo-node3']['status']['podIP']}:{port}",
               f"clusterip={svc['spec']['clusterIP']}:{port}", f"loadbalancer={lb}:{port}"]  # fmt: skip
    return ["ip", "netns", "exec", f"cni-{client_uid}", PY, "-m", "bench.upgrade_probe",
            *(f"--stream={s}" for s in streams), f"--dns-server={dns}",
            f"--dns-name=echo.{NS}.svc.cluster.local"]  # fmt: skip


def write_gaps(cluster: Cluster) -> list[tuple[float, float]]:
    """(when, seconds) of each gap between the writer's per-second ticks, minus the second itself;
    none when the file cannot be read (printed)."""
    proc = cluster.run("-n", NS, "exec", "writer-node1", "--", "cat", "/data/ticks", timeout=60)
    if proc.returncode:
        print(f"the writer's ticks could not be read: {proc.stderr.strip()}", flush=True)
        return []
    ticks = [float(x) for x in proc.stdout.split()]
    return [(a, b - a - 1.0) for a, b in itertools.pairwise(ticks)]


def report(windows: list[Window], events: list[dict[str, Any]], gaps: list[tuple[float, float]],
           add_failures: list[float], kills: list[tuple[float, str]] | None = None
           ) -> list[dict[str, Any]]:  # fmt: skip
    rows: list[dict[str, Any]] = []
    for w in windows:
        if w.not_rolled:
            rows.append({"component": w.name, "not_rolled": w.not_rolled})
            continue
        mine = [e for e in events if w.holds(e["t"])]
        stalls = [e["seconds"] for e in mine if e["kind"] == "stall"]
        rows.append({
            "component": w.name,
            "resets": sum(e["kind"] == "reset" for e in mine),
            "dns_failures": sum(e["kind"] == "dns_fail" for e in mine),
            "stream_stall_s": max(stalls, default=0.0),
            "write_stall_s": max((g for t, g in gaps if w.holds(t)), default=0.0),
            "add_failures": sum(w.holds(t) for t in add_failures),
            "rollout_s": (w.end - w.start) if w.name != "baseline" else 0.0,
            "reset_streams": sorted({e["stream"] for e in mine if e["kind"] == "reset"}),
            "liveness_kills": sorted(what for t, what in kills or () if w.holds(t)),
            "dns_why": dict(Counter(e.get("retry", "?") for e in mine if e["kind"] == "dns_fail")),
            "dns_slow": [e["seconds"] for e in mine if e["kind"] == "dns_slow"],
        })  # fmt: skip
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = ("resets", "dns>1", " stream", " write", "ADDfail", " rollout")
    print(f"{'component':38} " + " ".join(f"{c:>6}" for c in cols) + "  (targets: 0, 0, <1 s, <1 s, 0)")
    for r in rows:
        if r.get("not_rolled"):
            print(f"{r['component']:38} not rolled: {r['not_rolled']}")
            continue
        print(f"{r['component']:38} {r['resets']:>6} {r['dns_failures']:>6} {r['stream_stall_s']:>6.2f}s "
              f"{r['write_stall_s']:>5.2f}s {r['add_failures']:>7} {r['rollout_s']:>7.0f}s"
              + (f"  reset: {','.join(r['reset_streams'])}" if r["reset_streams"] else "")
              + (f"  liveness-killed: {','.join(r['liveness_kills'])}" if r.get("liveness_kills")
                 else "")
              + (f"  dns: {', '.join(f'{n} {why}' for why, n in r['dns_why'].items())}" if r.get("dns_why")
                 else "")
              + (f"  dns answered after 1 s: {len(r['dns_slow'])} (max {max(r['dns_slow']):.1f} s)"
                 if r.get("dns_slow") else ""))  # fmt: skip
    sys.stdout.flush()


def run(
    cluster: Cluster, image: str, new: str, order: tuple[str, ...], baseline: float
) -> list[dict[str, Any]]:
    cluster.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects(image)})
    )

    def all_ready() -> dict[str, Any] | None:
        ps = {p["metadata"]["name"]: p for p in cluster.get("-n", NS, "pods")["items"]}
        return ps if len(ps) == 4 and all(map(_ready, ps.values())) else None

    pods = wait("the bench's pods Ready", all_ready, 300, 2)
    argv = probe_argv(cluster, pods["client-node1"]["metadata"]["uid"])
    probe = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    events: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: events.extend(json.loads(line) for line in probe.stdout or ()),
                              daemon=True)  # fmt: skip
    reader.start()
    churn = Churn(cluster, image)
    churner = threading.Thread(target=churn.run, daemon=True)
    churner.start()
    time.sleep(5)  # the streams connected
    windows = [Window("baseline", time.time())]
    time.sleep(baseline)
    windows[-1].end = time.time()
    repo = image.rpartition(":")[0]
    datapath = cluster.get("-n", SYSTEM, "configmap", "k8shost-config")["data"].get("OVS_DATAPATH_TYPE")
    try:
        for workload in order:
            w = Window(workload, time.time())
            windows.append(w)
            if workload == OVS_NODE and datapath == "netdev":
                w.end, w.not_rolled = w.start, NETDEV_SHORT
                print(f"{OVS_NODE}: not rolled: {NETDEV_CUT}", flush=True)
                continue
            containers = set_image(cluster, workload, repo, new)
            status = cluster.run("-n", SYSTEM, "rollout", "status", workload, "--timeout=900s", timeout=960)
            w.end = time.time()
            print(f"{workload}: {','.join(containers)} -> {new}: {status.stdout.strip().splitlines()[-1:]} "
                  f"in {w.end - w.start:.0f} s", flush=True)  # fmt: skip
            if status.returncode:
                print(f"  rollout status failed: {status.stderr.strip()}", flush=True)
                break
            time.sleep(3)  # what the last replacement disturbed lands in this window
            w.end = time.time()
            # this component's row now (a run stopped later keeps it), the whole table at the end
            print_table(
                report([w], list(events), write_gaps(cluster), churn.add_failures(), liveness_kills(cluster))
            )
    except KeyboardInterrupt:  # Ctrl-C: stop rolling, keep the figures so far (the last rollout as it is)
        windows[-1].end = windows[-1].end or time.time()
        windows[-1].name += " (interrupted)"
        print(f"interrupted while rolling {windows[-1].name}: the table so far", flush=True)
    finally:
        churn.stop()
        probe.terminate()
        probe.wait(10)
        reader.join(5)
    rows = report(windows, events, write_gaps(cluster), churn.add_failures(), liveness_kills(cluster))
    print_table(rows)
    resets = [e for e in events if e["kind"] == "reset"]
    for e in resets[:20]:
        print(f"  reset {e['stream']} at {time.strftime('%H:%M:%S', time.gmtime(e['t']))}: {e['error']}")
    for e in [e for e in events if e["kind"] == "dns_fail"][:40]:
        print(f"  dns_fail at {time.strftime('%H:%M:%S', time.gmtime(e['t']))}: {e.get('first')}, "
              f"then {e.get('retry')}")  # fmt: skip
    slow = sorted(churn.ready_after.values())
    if slow:
        p50 = slow[len(slow) // 2]
        made = len(churn.created)
        print(f"churn pods: {made} created, {len(slow)} Ready after p50 {p50:.1f} s, max {slow[-1]:.1f} s")
    return rows


def main() -> None:
    tag = os.environ.get("UPGRADE_BENCH_TAG", "0.1.1")
    only = os.environ.get("UPGRADE_BENCH_ONLY", "")
    aliases = {"ds": "daemonset", "sts": "statefulset", "deploy": "deployment"}
    order = (
        tuple(f"{aliases.get(k, k)}/{n}" for k, _, n in (w.partition("/") for w in only.split(",") if w))
        or ORDER
    )
    if retag(tag):
        raise SystemExit("bench upgrade: the second tag could not be built")
    with booted() as cluster:
        run(
            cluster,
            image_name(),
            tagged(tag),
            order,
            baseline=float(os.environ.get("UPGRADE_BENCH_BASELINE", "30")),
        )
