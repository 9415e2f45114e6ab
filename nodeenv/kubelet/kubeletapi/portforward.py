"""kubelet's port-forward protocol (`portforward.k8s.io`, version 2) over one SPDY session: for each
forwarded connection the client opens an `error` stream and a `data` stream carrying the same
`requestid` and `port` headers; once both are there the kubelet dials the port inside the pod's
network namespace (localhost, as containerd does) and copies bytes between the data stream and the
connection; a failure is written to the error stream as text. Every stream is answered with a
SYN_REPLY, every PING echoed.

The session is transport-free: `feed` takes the client's bytes, `send` writes the session's (raw
after an HTTP upgrade, or inside WebSocket binary messages)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nodeenv.kubelet.kubeletapi import spdy

log = logging.getLogger(__name__)
Dial = Callable[[int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
Send = Callable[[bytes], Awaitable[None]]


@dataclass
class _Pair:
    port: str
    error: int = 0
    data: int = 0
    writer: asyncio.StreamWriter | None = None
    pending: list[bytes] = field(default_factory=list)
    """Data the client sent before the connection to the pod was made."""
    client_done: bool = False


class PortForwardSession:
    def __init__(self, pod: str, uid: str, dial: Dial, send: Send) -> None:
        self.pod, self.uid, self._dial, self._send = pod, uid, dial, send
        self._framer = spdy.Framer()
        self._pairs: dict[str, _Pair] = {}
        self._streams: dict[int, _Pair] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def _write(self, frame: bytes) -> None:
        async with self._lock:
            await self._send(frame)

    async def feed(self, data: bytes) -> None:
        """The client's bytes; raises SpdyError when the session must end."""
        for f in self._framer.feed(data):
            if f.kind == spdy.SYN_STREAM:
                await self._open(f)
            elif f.kind == 0:
                await self._client_data(f)
            elif f.kind == spdy.PING:
                await self._write(self._framer.ping(f.value))
            elif f.kind == spdy.RST_STREAM:
                self._reset(f.stream_id)
            elif f.kind == spdy.GOAWAY:
                raise spdy.SpdyError("the client went away")

    async def _open(self, f: spdy.Frame) -> None:
        kind, port, rid = f.header("streamtype"), f.header("port"), f.header("requestid")
        await self._write(self._framer.syn_reply(f.stream_id))
        if kind not in ("error", "data"):
            await self._write(self._framer.rst_stream(f.stream_id, spdy.RST_PROTOCOL_ERROR))
            return
        pair = self._pairs.setdefault(rid or str(f.stream_id), _Pair(port))
        setattr(pair, kind, f.stream_id)
        self._streams[f.stream_id] = pair
        if pair.error and pair.data:
            task = asyncio.ensure_future(self._forward(pair))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _client_data(self, f: spdy.Frame) -> None:
        pair = self._streams.get(f.stream_id)
        if pair is None or f.stream_id != pair.data:
            return  # the error stream's FIN (the client never writes to it), or a reset stream
        if pair.writer is None:
            pair.pending.append(f.payload)
            pair.client_done = pair.client_done or f.fin
            return
        if f.payload:
            pair.writer.write(f.payload)
            await pair.writer.drain()
        if f.fin and pair.writer.can_write_eof():
            pair.writer.write_eof()

    def _reset(self, stream_id: int) -> None:
        pair = self._streams.pop(stream_id, None)
        if pair is not None and pair.writer is not None:
            pair.writer.close()

    async def _forward(self, pair: _Pair) -> None:
        try:
            port = int(pair.port)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            await self._fail(pair, f'invalid port "{pair.port}"')
            return
        try:
            reader, writer = await self._dial(port)
        except OSError as e:
            await self._fail(pair, f"error forwarding port {port} to pod {self.pod}, uid {self.uid}: {e}")
            return
        pair.writer = writer
        for chunk in pair.pending:
            writer.write(chunk)
        if pair.client_done and writer.can_write_eof():
            writer.write_eof()
        pair.pending.clear()
        try:
            while chunk := await reader.read(spdy.MAX_DATA):
                await self._write(self._framer.data(pair.data, chunk))
        except OSError as e:
            log.info("port-forward to %s:%d ended: %s", self.pod, port, e)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, RuntimeError):  # the session may be gone
                await self._write(self._framer.data(pair.data, b"", fin=True))
                await self._write(self._framer.data(pair.error, b"", fin=True))

    async def _fail(self, pair: _Pair, message: str) -> None:
        log.warning("%s", message)
        await self._write(self._framer.data(pair.error, message.encode(), fin=True))
        await self._write(self._framer.data(pair.data, b"", fin=True))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for pair in self._pairs.values():
            if pair.writer is not None:
                pair.writer.close()
