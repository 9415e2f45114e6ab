"""FlashDNS: propagation delay and queries per second of the embedded server, beside Knot DNS.

1. Propagation: flashdns-controller (embedded backend, in this process) on the Kubernetes API
   double; 1,000 Services created one after another through the real client; for each, the time
   from the create call until its name answers NOERROR over UDP on loopback.
2. QPS: `dnsperf` (pinned to CPU 0) on a fixed query mix over the same 1,000-Service zone
   (60% A hits, 20% SRV, 20% NXDOMAIN from search-path expansions), 4 clients, against, in turn,
   each pinned to CPU 1: the embedded server (a child process serving the zone with DnsServer),
   Knot DNS (`knotd` with its own config and zone file in a temp dir on loopback) and the floor:
   a bare blocking recvfrom/sendto loop replaying cached dnslib answers (no zone, no checks).

    make bench BENCH=dns          (or: .venv/bin/python -m bench dns)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dnslib import QTYPE, RR, A, DNSRecord

SERVICES = 1000
DOMAIN = "cluster.local"
SERVER_CPU, CLIENT_CPU = "1", "0"
DNSPERF_SECONDS = 10
OUTSTANDING = "100"
"""dnsperf's queries in flight: more overflows a default-sized socket buffer (Knot's, the floor's) and
every dropped query then holds a slot for dnsperf's 5 s timeout, measuring the drops, not the server."""
CLUSTER_DNS = "10.96.0.10"
QPS_TARGET, PROPAGATION_P99_TARGET_MS, COREDNS_QPS = 30_000, 500.0, 34_000


def zone_records() -> dict[str, object]:
    """The bench zone: SERVICES ClusterIP Services with a named port (as records.py makes them)."""
    from controllers.flashdns.records import service_records
    from controllers.resources import Service

    out = {}
    for i in range(SERVICES):
        svc = Service.from_dict({"metadata": {"name": f"svc-{i}", "namespace": "bench"},
                                 "spec": {"clusterIP": f"10.96.{i // 250 + 1}.{i % 250 + 1}",
                                          "ports": [{"name": "http", "port": 80}]}})  # fmt: skip
        out[f"service/bench/svc-{i}"] = service_records(svc, [], DOMAIN)
    return out


def query_mix(path: Path, n: int = 5000) -> None:
    rng = random.Random(7)
    lines = []
    for _ in range(n):
        i, k = rng.randrange(SERVICES), rng.random()
        if k < 0.6:
            lines.append(f"svc-{i}.bench.svc.{DOMAIN} A")
        elif k < 0.8:
            lines.append(f"_http._tcp.svc-{i}.bench.svc.{DOMAIN} SRV")
        else:
            lines.append(f"svc-{i}.bench.svc.{DOMAIN}.bench.svc.{DOMAIN} A")
    path.write_text("\n".join(lines) + "\n")


# ---- child processes (pinned with taskset) ----
def serve_embedded(port: int) -> None:
    from controllers.flashdns.ratelimit import ResponseRateLimit
    from controllers.flashdns.server import DnsServer
    from controllers.flashdns.zone import Zone, apex_records

    async def run() -> None:
        zone = Zone(DOMAIN)
        zone.replace("zone", apex_records(zone, CLUSTER_DNS))
        for owner, recs in zone_records().items():
            zone.replace(owner, recs)  # type: ignore[arg-type]
        # response rate limiting on, at a rate dnsperf never reaches: its per-answer cost is measured
        await DnsServer(zone, None, rrl=ResponseRateLimit(rate=1e12)).start(f"127.0.0.1:{port}")
        await asyncio.Event().wait()

    asyncio.run(run())


def serve_floor(port: int) -> None:
    """What Python costs alone: recvfrom, a dict lookup, sendto (answers built once by dnslib)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    cache: dict[bytes, bytes] = {}
    while True:
        data, addr = s.recvfrom(65535)
        hit = cache.get(data[2:])
        if hit is None:
            q = DNSRecord.parse(data)
            r = q.reply()
            r.add_answer(RR(q.q.qname, QTYPE.A, rdata=A("10.96.0.1"), ttl=30))
            hit = cache[data[2:]] = r.pack()[2:]
        s.sendto(data[:2] + hit, addr)


def knot_files(tmp: Path, port: int) -> Path:
    zone = [f"$ORIGIN {DOMAIN}.", "$TTL 30",
            f"@ SOA ns.dns.{DOMAIN}. hostmaster.{DOMAIN}. 1 7200 1800 86400 5", f"@ NS ns.dns.{DOMAIN}.",
            f"ns.dns A {CLUSTER_DNS}", 'dns-version TXT "1.1.0"']  # fmt: skip
    for recs in zone_records().values():
        for r in recs:  # type: ignore[attr-defined]
            if r.name.endswith(f".{DOMAIN}."):
                zone.append(f"{r.name} {r.type} {r.value}")
    (tmp / f"{DOMAIN}.zone").write_text("\n".join(zone) + "\n")
    conf = tmp / "knot.conf"
    conf.write_text(f"""server:
    rundir: "{tmp}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{tmp}"
log:
  - target: stderr
    any: warning
zone:
  - domain: {DOMAIN}
    storage: "{tmp}"
    file: "{DOMAIN}.zone"
""")
    return conf


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_answers(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    q = DNSRecord.question(f"svc-1.bench.svc.{DOMAIN}").pack()
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.2)
        while time.monotonic() < deadline and proc.poll() is None:
            s.sendto(q, ("127.0.0.1", port))
            try:
                s.recv(4096)
                return
            except TimeoutError:
                continue
    raise RuntimeError(f"no DNS answer on port {port} from {proc.args} (exit code {proc.poll()})")


def dnsperf(port: int, mix: Path) -> dict[str, float]:
    out = subprocess.run(["taskset", "-c", CLIENT_CPU, "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d",
                          str(mix), "-l", str(DNSPERF_SECONDS), "-c", "4", "-q", OUTSTANDING],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    qps = float(re.search(r"Queries per second:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    lat = float(re.search(r"Average Latency \(s\):\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    lost = re.search(r"Queries lost:\s+(\d+)", out)
    return {"qps": qps, "latency_ms": lat * 1000, "lost": float(lost.group(1)) if lost else 0.0}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_server(argv: list[str], port: int, mix: Path) -> dict[str, float]:
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, *argv], stdout=subprocess.DEVNULL)
    try:
        wait_answers(port, proc)
        dnsperf(port, mix)  # warm-up: every distinct query answered once
        before = cpu_seconds(proc.pid)
        result = dnsperf(port, mix)
        busy = (cpu_seconds(proc.pid) - before) / DNSPERF_SECONDS
        return {**result, "cpu": busy, "per_cpu": result["qps"] / max(busy, 1e-3)}
    finally:
        proc.terminate()
        proc.wait(10)


def qps_runs() -> dict[str, dict[str, float]]:
    missing = [t for t in ("dnsperf", "knotd", "taskset") if shutil.which(t) is None]
    if missing:
        raise SystemExit(f"bench dns needs {', '.join(missing)}: run `make setup`")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-dns-") as d:
        tmp = Path(d)
        mix = tmp / "mix.txt"
        query_mix(mix)
        me = [sys.executable, "-m", "bench.bench_dns"]
        port = free_port()
        results["embedded"] = measure_server([*me, "--serve", str(port)], port, mix)
        port = free_port()
        results["knot"] = measure_server(["knotd", "-c", str(knot_files(tmp, port))], port, mix)
        port = free_port()
        results["floor"] = measure_server([*me, "--floor", str(port)], port, mix)
    return results


# ---- propagation ----
async def propagation(kubeconfig: Path, tmp: Path) -> list[float]:
    from controllers.flashdns.main import app as flashdns_app
    from controllers.machinery import NAMESPACES, ControllerApp
    from controllers.machinery import SERVICES as SERVICE_KIND
    from controllers.machinery.kubeconfig import load_api_client
    from controllers.machinery.rest import KubeClient
    from controllers.machinery.settings import parse

    port_file = tmp / "dns-port.json"
    argv = ["--kubeconfig", str(kubeconfig), "--leader-elect=false", "--metrics-address", "off",
            "--dns-address", "127.0.0.1:0", "--dns-port-file", str(port_file), "--upstreams", "none",
            "--log-level", "warning"]  # fmt: skip
    settings = parse(
        "flashdns-controller", "", argv, {}, prefix="FLASHDNS_", add_arguments=flashdns_app.add_arguments
    )
    app = ControllerApp("flashdns-controller", flashdns_app.setup, env_prefix="FLASHDNS_")
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(settings, stop))
    while not port_file.exists():
        await asyncio.sleep(0.01)
    port = json.loads(port_file.read_text())["dns"]
    delays = []
    async with await load_api_client(kubeconfig, in_cluster=False) as api:
        client = KubeClient(api)
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
        )
        for i in range(SERVICES):
            meta = {"name": f"svc-{i}", "namespace": "bench"}
            obj = {"apiVersion": "v1", "kind": "Service", "metadata": meta,
                   "spec": {"ports": [{"name": "http", "port": 80}]}}  # fmt: skip
            t0 = time.perf_counter()
            await client.create(SERVICE_KIND, obj)
            await asyncio.to_thread(until_noerror, port, f"svc-{i}.bench.svc.{DOMAIN}")
            delays.append((time.perf_counter() - t0) * 1000)
    stop.set()
    await task
    return delays


def until_noerror(port: int, name: str) -> None:
    q = DNSRecord.question(name).pack()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        while True:
            s.sendto(q, ("127.0.0.1", port))
            reply = s.recv(4096)
            if reply[3] & 0x0F == 0 and reply[6:8] != b"\0\0":
                return
            time.sleep(0.0005)


def propagation_run() -> list[float]:
    from nodeenv.kubeapi.server import ThreadedKubeApi
    from nodeenv.kubeapi.state import ApiConfig

    with tempfile.TemporaryDirectory(prefix="bench-dns-api-") as d:
        api = ThreadedKubeApi(Path(d), ApiConfig())
        api.start()
        try:
            return asyncio.run(propagation(api.server.kubeconfig, Path(d)))
        finally:
            api.stop()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    delays = propagation_run()
    print(f"propagation, {SERVICES} Services created one by one (create call → name answers over UDP):")
    print(f"  median {statistics.median(delays):7.1f} ms   p95 {pct(delays, 0.95):7.1f} ms   "
          f"p99 {pct(delays, 0.99):7.1f} ms   max {max(delays):7.1f} ms   "
          f"(target p99 < {PROPAGATION_P99_TARGET_MS:.0f} ms; spec: 10 s)")  # fmt: skip
    r = qps_runs()
    print(f"queries/s, dnsperf on CPU {CLIENT_CPU}, server on CPU {SERVER_CPU}, {DNSPERF_SECONDS} s, "
          "mix 60% A / 20% SRV / 20% NXDOMAIN (search path), 1,000-Service zone:")  # fmt: skip
    for name, label in (("embedded", "embedded FlashDNS"), ("knot", "Knot DNS (knotd)"),
                        ("floor", "floor: bare Python UDP loop")):  # fmt: skip
        x = r[name]
        print(f"  {label:<28} {x['qps']:>9,.0f} q/s at {x['cpu'] * 100:3.0f}% of its CPU = "
              f"{x['per_cpu']:>9,.0f} q per CPU-second   avg latency {x['latency_ms']:.2f} ms   "
              f"lost {x['lost']:.0f}")  # fmt: skip
    ratio = {k: r["embedded"][k] / r["knot"][k] for k in ("qps", "per_cpu")}
    print(f"  embedded / knot: {ratio['qps']:.2f} in q/s, {ratio['per_cpu']:.2f} per CPU-second   "
          f"(dnsperf on one core tops out near the floor's q/s: compare per CPU-second)")  # fmt: skip
    print(f"  embedded / floor per CPU-second: {r['embedded']['per_cpu'] / r['floor']['per_cpu']:.2f}")
    print(f"  target >= {QPS_TARGET:,} q/s on one core (CoreDNS publishes ~{COREDNS_QPS:,} on two vCPUs): "
          f"{'met' if r['embedded']['qps'] >= QPS_TARGET else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve_embedded(int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--floor":
        serve_floor(int(sys.argv[2]))
    else:
        main()
