"""The traffic of `make bench BENCH=upgrade`, from inside a client pod's network namespace
(`ip netns exec cni-<pod uid> python -m bench.upgrade_probe ...`): what the pod itself would send.

- one long-lived TCP stream per --stream NAME=IP:PORT (an echo server behind it): a line every 100 ms,
  its echo awaited; a reset (ECONNRESET, EPIPE, or the peer closing) and every gap over 0.3 s between
  echoes are reported; a reset stream is reconnected;
- a DNS A query for --dns-name to --dns-server every 100 ms, waited for as a pod's resolver waits
  (glibc's defaults, resolv.conf(5) `timeout:5 attempts:2`: 5 s, then one retry of 5 s); a failure
  is reported only when the retry fails too, with why each of the two failed (a timeout, the
  rcode); an answer that took over 1 s is reported as slow.

Events go to stdout as JSON lines {"t": <unix time>, "kind": "reset"|"stall"|"dns_fail"|"dns_slow",
...} until SIGTERM."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence

from dnslib import QTYPE, RCODE, DNSRecord  # type: ignore[import-untyped]  # dnslib ships no stubs

INTERVAL = 0.1
STALL = 0.3
RESOLVER_TIMEOUT = 5.0
"""What a pod's resolver waits for each try (glibc's default; kubelet's resolv.conf sets no timeout)."""
DNS_SLOW = 1.0
_out = threading.Lock()
_stop = threading.Event()


def emit(kind: str, **fields: object) -> None:
    with _out:
        print(json.dumps({"t": time.time(), "kind": kind, **fields}), flush=True)


def _connect(addr: tuple[str, int]) -> socket.socket:
    while not _stop.is_set():
        try:
            s = socket.create_connection(addr, timeout=5)
            s.settimeout(30)
            return s
        except OSError:
            time.sleep(0.5)
    raise SystemExit


def stream(name: str, addr: tuple[str, int]) -> None:
    sock = _connect(addr)
    emit("connected", stream=name)
    last = time.time()
    n = 0
    while not _stop.is_set():
        n += 1
        line = f"{name} {n}\n".encode()
        try:
            sock.sendall(line)
            got = b""
            while len(got) < len(line):
                chunk = sock.recv(len(line) - len(got))
                if not chunk:
                    raise ConnectionResetError("closed by the peer")
                got += chunk
        except (ConnectionResetError, BrokenPipeError, TimeoutError, OSError) as e:
            emit("reset", stream=name, error=f"{type(e).__name__}: {e}")
            sock.close()
            sock = _connect(addr)
            emit("connected", stream=name)
            last = time.time()
            continue
        now = time.time()
        if now - last > STALL:
            emit("stall", stream=name, seconds=round(now - last, 3), since=last)
        last = now
        time.sleep(INTERVAL)


def ask(server: str, name: str, port: int = 53, timeout: float = RESOLVER_TIMEOUT) -> str:
    """'' when an A record came back, else why not: `timeout` (no reply within `timeout`: the packet
    or its reply lost or late), `rcode NXDOMAIN`/`rcode SERVFAIL`/... (the server answered, without
    the name), `no A record`, or the socket's error."""
    try:
        reply = DNSRecord.parse(DNSRecord.question(name, "A").send(server, port, timeout=timeout))
    except TimeoutError:
        return "timeout"
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    if any(rr.rtype == QTYPE.A for rr in reply.rr):
        return ""
    rcode = reply.header.rcode
    return f"rcode {RCODE.get(rcode)}" if rcode else "no A record"


def dns(server: str, name: str) -> None:
    while not _stop.is_set():
        started = time.time()
        first = ask(server, name)
        if first and (retry := ask(server, name)):
            emit("dns_fail", name=name, first=first, retry=retry)
        elif (took := time.time() - started) > DNS_SLOW:
            emit("dns_slow", name=name, seconds=round(took, 3), retried=bool(first))
        time.sleep(INTERVAL)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] = os.environ) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.upgrade_probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--stream", action="append", default=[], help="NAME=IP:PORT of an echo server")
    p.add_argument("--dns-server", default=env.get("UPGRADE_PROBE_DNS_SERVER", ""),
                   help="the cluster DNS address (env UPGRADE_PROBE_DNS_SERVER)")  # fmt: skip
    p.add_argument("--dns-name", default=env.get("UPGRADE_PROBE_DNS_NAME", ""),
                   help="the name asked every 100 ms (env UPGRADE_PROBE_DNS_NAME)")  # fmt: skip
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    threads = []
    for spec in a.stream:
        name, _, where = spec.partition("=")
        host, _, port = where.rpartition(":")
        threads.append(threading.Thread(target=stream, args=(name, (host, int(port))), daemon=True))
    if a.dns_server and a.dns_name:
        threads.append(threading.Thread(target=dns, args=(a.dns_server, a.dns_name), daemon=True))
    for t in threads:
        t.start()
    emit("started", streams=len(a.stream))
    while not _stop.wait(0.5):
        pass
    emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
