"""The embedded authoritative DNS server: UDP and TCP on one address, answers from the Zone.

UDP is the hot path and has a thread of its own running a blocking recvfrom/sendto loop: an
asyncio datagram protocol measured 4x slower here (~15k vs ~63k QPS on one core, `bench_dns`
prints the floor). Replies are cached as wire bytes keyed by the query without its ID, and
replayed with the new ID patched in; the cache is dropped on every zone change (the reader
captures the cache before it reads the zone, so an answer computed from old data can only land
in the dropped cache). Cache misses are answered in the thread through `Answerer`; queries for
other names (and CNAMEs leaving the zone) are handed to the event loop, which forwards them.
TCP (RFC 7766: length-prefixed, several queries per connection, idle timeout) runs on asyncio.
UDP answers (cached, computed or forwarded) pass the response rate limit (ratelimit.py) when one is
configured; forwarded UDP replies are capped at the size we advertise, as our own are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from dataclasses import dataclass

from dnslib import DNSRecord  # type: ignore[import-untyped]

from controllers.flashdns.answers import REFUSED, SERVFAIL, Answer, Answerer, capped, header_error
from controllers.flashdns.figures import ResponseFigures
from controllers.flashdns.forwarder import Forwarder
from controllers.flashdns.ratelimit import ResponseRateLimit, Verdict, truncated
from controllers.flashdns.zone import Zone

log = logging.getLogger(__name__)
TCP_IDLE = 10.0
MAX_FORWARDS = 1000
"""UDP queries being forwarded at once; beyond, REFUSED at once (CoreDNS forward's max_concurrent)."""


@dataclass(slots=True)
class ServerStats:
    udp_queries: int = 0
    cache_hits: int = 0
    tcp_queries: int = 0
    forwarded: int = 0
    forward_failures: int = 0
    dropped: int = 0


def split_host_port(text: str, default_port: int = 53) -> tuple[str, int]:
    """`0.0.0.0:53`, `[::]:53`, `10.96.0.10` → (host, port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest.lstrip(":") or default_port)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port)
    return text, default_port


class DnsServer:
    def __init__(
        self,
        zone: Zone,
        forwarder: Forwarder | None,
        *,
        cache_size: int = 50_000,
        max_forwards: int = MAX_FORWARDS,
        rrl: ResponseRateLimit | None = None,
    ) -> None:
        self.zone, self.forwarder = zone, forwarder
        self.rrl = rrl if rrl is not None else ResponseRateLimit()
        self.answerer = Answerer(zone, recursion=bool(forwarder and forwarder.upstreams))
        self.stats = ServerStats()
        self.responses = ResponseFigures()
        self.port = 0
        self._cache: dict[bytes, bytes] = {}
        self._cache_size, self._max_forwards = cache_size, max_forwards
        self._udp: socket.socket | None = None
        self._tcp_sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._tcp: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        zone.on_change.append(self._drop_cache)

    def _drop_cache(self) -> None:
        self._cache = {}

    def bind(self, address: str) -> int:
        """Bind UDP and TCP on `address` (port 0: a free port, the same for both); returns the port.

        Until `start`, queries wait in the kernel (the UDP buffer, the TCP backlog) rather than being
        refused, and a taken address fails here, at start-up, with a clear error."""
        host, port = split_host_port(address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        for _ in range(20):  # port 0: the UDP port picked may be taken for TCP; try another
            udp = socket.socket(family, socket.SOCK_DGRAM)
            tcp = socket.socket(family, socket.SOCK_STREAM)
            try:
                udp.bind((host, port))
                tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                tcp.bind((host, udp.getsockname()[1]))
                tcp.listen(128)
                break
            except OSError:
                udp.close()
                tcp.close()
                if port:
                    raise
        else:
            raise OSError(f"no port free for both UDP and TCP on {host}")
        self.port = udp.getsockname()[1]
        udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._udp, self._tcp_sock = udp, tcp
        return self.port

    async def start(self, address: str | None = None) -> int:
        """Serve (binding `address` first unless `bind` was called); returns the port."""
        if self._udp is None:
            if address is None:
                raise ValueError("start() needs an address unless bind() was called")
            self.bind(address)
        assert self._tcp_sock is not None
        self._loop = asyncio.get_running_loop()
        self._tcp = await asyncio.start_server(self._tcp_client, sock=self._tcp_sock)
        self._thread = threading.Thread(target=self._udp_loop, name="flashdns-udp", daemon=True)
        self._thread.start()
        log.info("DNS server for %s on port %d (udp+tcp)", self.zone.origin, self.port)
        return self.port

    async def stop(self) -> None:
        self._stopping = True
        if self._udp is not None:
            host = self._udp.getsockname()[0]
            wake = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
            with contextlib.suppress(OSError):
                self._udp.sendto(b"", (wake, self.port))  # wakes the blocked recvfrom
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
        if self._tcp is not None:
            self._tcp.close()
            await self._tcp.wait_closed()
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._udp is not None:
            self._udp.close()
        if self._tcp is None and self._tcp_sock is not None:
            self._tcp_sock.close()  # bound, never served

    # ---- UDP: the hot path (its own thread) ----
    def _udp_loop(self) -> None:
        assert self._udp is not None
        recv, send, stats = self._udp.recvfrom, self._udp.sendto, self.stats
        limit = self.rrl.check if self.rrl.enabled else None
        rcodes, latency, clock = self.responses.rcodes, self.responses.udp, time.perf_counter
        while not self._stopping:
            try:
                data, addr = recv(65535)
                t0 = clock()
                stats.udp_queries += 1
                cached = self._cache.get(data[2:])
                if cached is not None:  # the hot path: no context managers, no calls but the syscalls
                    stats.cache_hits += 1
                    verdict = Verdict.SEND if limit is None else limit(addr[0])
                    if verdict is not Verdict.DROP:  # counted as it leaves (a client sees it counted)
                        rcodes[cached[1] & 15] += 1
                        latency.observe(clock() - t0)
                    if verdict is Verdict.SEND:
                        send(data[:2] + cached, addr)
                    elif verdict is Verdict.SLIP:
                        send(truncated(data[:2] + cached), addr)
                else:
                    self._udp_miss(data, addr, t0)
            except OSError:
                continue  # a send to a vanished client, or the socket closing on stop
            except Exception:  # a bug must cost one answer, never the server
                log.exception("a UDP query crashed the answerer")
                if len(data) >= 12:
                    rcodes[SERVFAIL] += 1
                    with contextlib.suppress(OSError):
                        send(header_error(data, SERVFAIL), addr)

    def _udp_miss(self, data: bytes, addr: tuple[str, int], t0: float) -> None:
        cache = self._cache  # before reading the zone: see the module docstring
        ans = self.answerer.answer(data, tcp=False)
        if ans.forward or ans.chase:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._spawn_udp, data, addr, ans, t0)
            return
        if ans.wire is None:
            self.stats.dropped += 1
            return
        if ans.cacheable and data:
            if len(cache) >= self._cache_size:
                cache.clear()
            cache[data[2:]] = ans.wire[2:]
        self._udp_send(ans.wire, addr, t0)

    def _udp_send(self, wire: bytes, addr: tuple[str, int], t0: float) -> None:
        """One UDP reply through the response rate limit (slipped: an empty TC reply; or dropped)."""
        verdict = self.rrl.check(addr[0]) if self.rrl.enabled else Verdict.SEND
        if verdict is Verdict.DROP:
            return
        assert self._udp is not None
        self.responses.sent(wire, self.responses.udp, time.perf_counter() - t0)
        with contextlib.suppress(OSError):
            self._udp.sendto(wire if verdict is Verdict.SEND else truncated(wire), addr)

    def _spawn_udp(self, data: bytes, addr: tuple[str, int], ans: Answer, t0: float) -> None:
        if len(self._tasks) >= self._max_forwards and self._udp is not None:  # a flood of foreign names
            self.stats.forward_failures += 1
            refused = header_error(data, REFUSED)
            self.responses.sent(refused, self.responses.udp, time.perf_counter() - t0)
            with contextlib.suppress(OSError):
                self._udp.sendto(refused, addr)
            return

        async def reply() -> None:
            wire = capped(await self._resolve(data, ans, tcp=False), data)
            if self._udp is not None:
                self._udp_send(wire, addr, t0)

        task = asyncio.get_running_loop().create_task(reply())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resolve(self, data: bytes, ans: Answer, *, tcp: bool) -> bytes:
        """Forwarded reply (or our reply completed with the chased CNAME target); SERVFAIL on failure."""
        assert self.forwarder is not None
        self.stats.forwarded += 1
        try:
            if ans.forward:
                reply = await self.forwarder.forward(data, tcp=tcp)
                if reply is not None:
                    return reply
            elif ans.wire is not None:
                qtype = DNSRecord.parse(data).q.qtype
                chased = await self.forwarder.lookup(ans.chase, qtype)
                return self.answerer.with_chased(data, ans.wire, chased, tcp)
        except Exception:
            log.exception("forwarding failed")
        self.stats.forward_failures += 1
        return header_error(data, SERVFAIL)

    # ---- TCP ----
    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(2), TCP_IDLE), "big")
                data = await asyncio.wait_for(reader.readexactly(size), TCP_IDLE)
                self.stats.tcp_queries += 1
                t0 = time.perf_counter()
                wire = await self._tcp_answer(data)
                if wire is None:
                    continue
                self.responses.sent(wire, self.responses.tcp, time.perf_counter() - t0)
                writer.write(len(wire).to_bytes(2, "big") + wire)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            pass
        except Exception:
            log.exception("TCP client crashed the answerer")
        finally:
            writer.close()

    async def _tcp_answer(self, data: bytes) -> bytes | None:
        try:
            ans = self.answerer.answer(data, tcp=True)
        except Exception:  # a bug must cost one answer, never the connection
            log.exception("TCP query crashed the answerer")
            return header_error(data, SERVFAIL) if len(data) >= 12 else None
        if ans.forward or ans.chase:
            return await self._resolve(data, ans, tcp=True)
        return ans.wire
