"""IAM webhook throughput and latency over HTTPS + mTLS with keep-alive.

The server under test is `iam-webhook serve` in one process pinned to CPU 0 (logging its
one line per review to a file, metrics on); the load generator is this process pinned to
CPU 1: keep-alive TLS connections, closed loop (each connection sends its next review as soon
as the previous answer arrived). Runs: RS256 and ES256 tokens, unique (every review a cache
miss) and repeated (16 tokens cycled: cache hits), at concurrency 4 and 64; a paced run at
1,000 reviews/s for the latency at a realistic load; and, in the same run, the reference: a
bare aiohttp handler doing only a PyJWT RS256 check over the same mTLS, on the same CPU.

    make bench BENCH=webhook          (or: .venv/bin/python -m bench webhook)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_CPU, CLIENT_CPU = 0, 1
ISSUER, AUDIENCE = "https://iam.bench.local", "k8shost-bench"
PATH = "/apis/iam.plasmacloud.io/v1/authenticate"
REQUESTS = 5000
WARMUP = 300
_CL = re.compile(rb"content-length: *(\d+)", re.I)
_AUTHENTICATED = re.compile(rb'"authenticated": ?true')


class Conn(asyncio.Protocol):
    """A minimal HTTP/1.1 keep-alive client: one request in flight per connection."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        m = _CL.search(self.buf, 0, end)
        length = int(m.group(1)) if m else 0
        if len(self.buf) < end + 4 + length:
            return
        status, body = int(self.buf[9:12]), bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("closed"))

    async def request(self, data: bytes) -> tuple[int, bytes]:
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(data)
        return await self.waiter


def http_request(token: str) -> bytes:
    body = json.dumps(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    ).encode()
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


@dataclass
class Result:
    name: str
    rate: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: int
    cpu_us: float = 0.0
    """Server CPU time (user + system) per review: the load generator cannot hide it."""

    def line(self) -> str:
        capacity = 1e6 / self.cpu_us if self.cpu_us else 0.0
        return (
            f"{self.name:<42} {self.rate:6.0f}/s  p50 {self.p50_ms:6.2f}  p95 {self.p95_ms:6.2f}  "
            f"p99 {self.p99_ms:6.2f} ms  server {self.cpu_us:5.0f} us CPU/review "
            f"(= {capacity:5.0f}/s per core)  err {self.errors}"
        )


class CpuMeter:
    """CPU seconds a process used, from /proc/<pid>/stat (utime + stime)."""

    def __init__(self, pid: int) -> None:
        self.pid, self._tick = pid, os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick


def _pct(lat: list[float], q: float) -> float:
    return statistics.quantiles(lat, n=1000)[int(q * 1000) - 1] * 1000


async def _connect(port: int, ctx: ssl.SSLContext, n: int) -> list[Conn]:
    loop = asyncio.get_running_loop()
    out = []
    for _ in range(n):
        _, proto = await loop.create_connection(Conn, "127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        out.append(proto)
    return out


def _ok(status: int, body: bytes) -> bool:
    return status == 200 and _AUTHENTICATED.search(body) is not None


def _result(
    name: str, conns: list[Conn], lat: list[float], errors: int, elapsed: float, used: float
) -> Result:
    """Close the run's connections and summarise it (`used`: server CPU seconds during the run)."""
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    return Result(name, len(lat) / elapsed, _pct(lat, 0.5), _pct(lat, 0.95), _pct(lat, 0.99), errors,
                  used / len(lat) * 1e6)  # fmt: skip


async def closed_loop(
    name: str, port: int, ctx: ssl.SSLContext, reqs: list[bytes], conc: int, cpu: CpuMeter
) -> Result:
    conns = await _connect(port, ctx, conc)
    counter = itertools.count()
    lat: list[float] = []
    errors = 0

    async def worker(c: Conn, limit: int, record: bool) -> None:
        nonlocal errors
        while (i := next(counter)) < limit:
            t = time.perf_counter()
            status, body = await c.request(reqs[i % len(reqs)])
            if record:
                lat.append(time.perf_counter() - t)
            errors += not _ok(status, body)

    await asyncio.gather(*(worker(c, WARMUP, False) for c in conns))
    counter = itertools.count(WARMUP)
    t0, cpu0 = time.perf_counter(), cpu.seconds()
    await asyncio.gather(*(worker(c, WARMUP + REQUESTS, True) for c in conns))
    return _result(name, conns, lat, errors, time.perf_counter() - t0, cpu.seconds() - cpu0)


async def paced(
    name: str, port: int, ctx: ssl.SSLContext, reqs: list[bytes], rate: float, seconds: float, cpu: CpuMeter
) -> Result:
    """Open loop: request i is due at t0 + i/rate; latency counts from when it was due."""
    conns = await _connect(port, ctx, 16)
    free: asyncio.Queue[Conn] = asyncio.Queue()
    for c in conns:
        free.put_nowait(c)
    lat: list[float] = []
    errors = 0

    async def one(i: int, due: float) -> None:
        nonlocal errors
        c = await free.get()
        status, body = await c.request(reqs[i % len(reqs)])
        lat.append(time.perf_counter() - due)
        errors += not _ok(status, body)
        free.put_nowait(c)

    tasks = []
    t0, cpu0 = time.perf_counter(), cpu.seconds()
    for i in range(int(rate * seconds)):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    return _result(name, conns, lat, errors, time.perf_counter() - t0, cpu.seconds() - cpu0)


def _pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


def _start(argv: list[str], port_file: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, preexec_fn=lambda: _pin(SERVER_CPU)
        )
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{argv[3]} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    return proc, int(json.loads(port_file.read_text())["https"])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tokens(key: Any, alg: str, kid: str, n: int) -> list[bytes]:
    import jwt

    now = int(time.time())
    base = {"iss": ISSUER, "aud": [AUDIENCE], "iat": now, "exp": now + 3600, "org_id": "org-bench",
            "project_id": "proj-bench", "email": "bench@example.com", "email_verified": True,
            "roles": ["project_member"]}  # fmt: skip
    return [
        http_request(
            jwt.encode({**base, "sub": f"user-{uuid.uuid4()}"}, key, algorithm=alg, headers={"kid": kid})
        )
        for _ in range(n)
    ]


def _setup(tmp: Path) -> dict[str, object]:
    from webhook.devcerts import issue_ca, issue_leaf, new_key, public_pem, write_pair
    from webhook.keys import thumbprint

    ca = issue_ca()
    ca_crt, _ = write_pair(tmp, "ca", *ca)
    srv = write_pair(tmp, "server", *issue_leaf(ca, "localhost", server_names=["localhost", "127.0.0.1"]))
    cli = write_pair(tmp, "client", *issue_leaf(ca, "k8s-apiserver", client=True))
    keys = {alg: new_key(alg) for alg in ("RS256", "ES256")}
    for alg, key in keys.items():
        (tmp / f"{alg}.pub").write_bytes(public_pem(key))
    ctx = ssl.create_default_context(cafile=str(ca_crt))
    ctx.load_cert_chain(*cli)
    kids = {alg: thumbprint(k.public_key()) for alg, k in keys.items()}
    return {"ca": ca_crt, "server": srv, "client": cli, "keys": keys, "kids": kids, "ctx": ctx}


def _webhook_argv(tmp: Path, env: dict[str, object]) -> list[str]:
    srv = env["server"]
    assert isinstance(srv, tuple)
    return [
        sys.executable, "-m", "webhook.main", "serve", "--host", "127.0.0.1", "--port", "0",
        "--health-port", "off", "--port-file", str(tmp / "webhook.port"),
        "--tls-cert", str(srv[0]), "--tls-key", str(srv[1]), "--client-ca", str(env["ca"]),
        "--client-cn", "k8s-apiserver", "--issuer", ISSUER, "--audience", AUDIENCE,
        "--key-file", f"{tmp / 'RS256.pub'},{tmp / 'ES256.pub'}", "--cache-ttl", "60",
    ]  # fmt: skip


ROUNDS = 2
REF = "reference RS256 (bare aiohttp+PyJWT)"


async def _head_to_head(
    ports: dict[str, int], env: dict[str, object], cpus: dict[str, CpuMeter]
) -> list[Result]:
    """RS256, unique tokens: reference and webhook alternately, ROUNDS times; the best of each."""
    ctx, keys, kids = env["ctx"], env["keys"], env["kids"]
    assert isinstance(ctx, ssl.SSLContext) and isinstance(keys, dict) and isinstance(kids, dict)
    ref_tokens = _tokens(keys["RS256"], "RS256", kids["RS256"], WARMUP + REQUESTS)  # no cache there
    best: dict[str, Result] = {}
    for _ in range(ROUNDS):
        for conc in (4, 64):
            fresh = _tokens(keys["RS256"], "RS256", kids["RS256"], WARMUP + REQUESTS)
            for name, server, reqs in (
                (f"{REF} c={conc}", "reference", ref_tokens),
                (f"webhook RS256 unique   c={conc}", "webhook", fresh),
            ):
                r = await closed_loop(name, ports[server], ctx, reqs, conc, cpus[server])
                print(r.line(), flush=True)
                if name not in best or r.rate > best[name].rate:
                    best[name] = r
    return list(best.values())


async def _webhook_rest(port: int, env: dict[str, object], cpu: CpuMeter) -> list[Result]:
    ctx, keys, kids = env["ctx"], env["keys"], env["kids"]
    assert isinstance(ctx, ssl.SSLContext) and isinstance(keys, dict) and isinstance(kids, dict)
    out = []
    for alg in ("RS256", "ES256"):
        repeated = _tokens(keys[alg], alg, kids[alg], 16)
        for conc in (4, 64):
            if alg != "RS256":
                unique = _tokens(keys[alg], alg, kids[alg], WARMUP + REQUESTS)
                out.append(
                    await closed_loop(f"webhook {alg} unique   c={conc}", port, ctx, unique, conc, cpu)
                )
                print(out[-1].line(), flush=True)
            out.append(await closed_loop(f"webhook {alg} repeated c={conc}", port, ctx, repeated, conc, cpu))
            print(out[-1].line(), flush=True)
    for alg in ("RS256", "ES256"):
        unique = _tokens(keys[alg], alg, kids[alg], 3000)
        out.append(await paced(f"webhook {alg} unique paced 1000/s", port, ctx, unique, 1000, 3.0, cpu))
        print(out[-1].line(), flush=True)
    return out


def _reference_argv(tmp: Path, env: dict[str, object]) -> list[str]:
    srv = env["server"]
    assert isinstance(srv, tuple)
    return [sys.executable, "-m", "bench.bench_webhook", "--reference-server", str(tmp / "ref.port"),
            str(srv[0]), str(srv[1]), str(env["ca"]), str(tmp / "RS256.pub")]  # fmt: skip


async def _all(ports: dict[str, int], env: dict[str, object], cpus: dict[str, CpuMeter]) -> list[Result]:
    return await _head_to_head(ports, env, cpus) + await _webhook_rest(ports["webhook"], env, cpus["webhook"])


def main() -> None:
    before = os.sched_getaffinity(0)
    _pin(CLIENT_CPU)
    try:
        _main()
    finally:
        os.sched_setaffinity(0, before)  # `make bench` runs other benchmarks in this process


def _main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as d:
        tmp = Path(d)
        env = _setup(tmp)
        print(f"servers on CPU {SERVER_CPU} (one process each, loaded one at a time), load generator on "
              f"CPU {CLIENT_CPU}; {REQUESTS} reviews per closed-loop run after {WARMUP} warm-up; "
              f"latencies in ms")  # fmt: skip
        procs = {
            "webhook": _start(_webhook_argv(tmp, env), tmp / "webhook.port", tmp / "webhook.log"),
            "reference": _start(_reference_argv(tmp, env), tmp / "ref.port", tmp / "ref.log"),
        }
        try:
            ports = {name: port for name, (_, port) in procs.items()}
            cpus = {name: CpuMeter(proc.pid) for name, (proc, _) in procs.items()}
            results = asyncio.run(_all(ports, env, cpus))
        finally:
            for proc, _ in procs.values():
                _stop(proc)
        log_lines = sum(1 for _ in (tmp / "webhook.log").open())
    by_name = {r.name: r for r in results}
    print(f"-- best of {ROUNDS} rounds, RS256 unique tokens:")
    for conc in (4, 64):
        w, r = by_name[f"webhook RS256 unique   c={conc}"], by_name[f"{REF} c={conc}"]
        print(w.line())
        print(r.line())
        print(
            f"ratio webhook/reference c={conc}: throughput {w.rate / r.rate:.2f}, "
            f"server CPU per review {w.cpu_us / r.cpu_us:.2f}"
        )
    print(f"webhook log lines written during the run: {log_lines}")


# ---- the reference server: a bare aiohttp handler doing only an RS256 check with PyJWT ----


def reference_server(port_file: str, cert: str, key: str, ca: str, pub: str) -> None:
    import jwt
    from aiohttp import web
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    public = load_pem_public_key(Path(pub).read_bytes())

    async def handle(request: web.Request) -> web.Response:
        token = (await request.json())["spec"]["token"]
        claims = jwt.decode(token, public, algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER)  # type: ignore[arg-type]
        status = {"authenticated": True, "user": {"username": claims["sub"], "uid": claims["sub"]}}
        return web.json_response(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status}
        )

    async def serve() -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(ca)
        app = web.Application()
        app.router.add_post(PATH, handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx).start()
        Path(port_file).write_text(json.dumps({"https": runner.addresses[0][1]}))
        await asyncio.Event().wait()

    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(serve())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--reference-server"]:
        reference_server(*sys.argv[2:7])
    else:
        main()
