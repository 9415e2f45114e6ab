"""SPDY/3.1 framing, the minimum the port-forward protocol needs (draft-mbelshe-httpbis-spdy-00):
frames parsed from a byte stream and built for the reply. Written here because no maintained
Python SPDY library exists; client-go's port-forward (moby/spdystream) speaks it, directly after an
HTTP upgrade or tunneled inside WebSocket binary messages (`SPDY/3.1+portforward.k8s.io`).

Header blocks are one zlib stream per direction and connection, primed with the protocol's
dictionary (section 2.6.10.1). Flow control is not enforced (spdystream enforces none either)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_PROTOCOL_ERROR, RST_INVALID_STREAM, RST_REFUSED_STREAM, RST_CANCEL = 1, 2, 3, 5
MAX_DATA = 32 * 1024
"""The largest DATA payload sent (the protocol allows 2**24 - 1)."""

_NAMES = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location",
    "content-md5", "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host",
    "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
    "location", "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
    "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via",
    "warning", "www-authenticate", "method", "get", "status",
)  # fmt: skip
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


def _dictionary() -> bytes:
    """The SPDY/3 header dictionary: length-prefixed names and values, then a run of common text."""
    words = [*_NAMES, "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + _TAIL.encode()


DICTIONARY = _dictionary()


class SpdyError(Exception):
    """The peer broke the protocol: the session ends (GOAWAY with PROTOCOL_ERROR)."""


@dataclass(frozen=True, slots=True)
class Frame:
    kind: int
    """A control frame's type, or 0 for DATA."""
    flags: int
    stream_id: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    payload: bytes = b""
    value: int = 0
    """PING's id, RST_STREAM's status, WINDOW_UPDATE's delta, GOAWAY's last stream."""

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k == name), "")


class Framer:
    """Bytes in, frames out (`feed`); frames to bytes (`syn_reply`, `data`, ...)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames = []
        while len(self._buf) >= 8:
            length = int.from_bytes(self._buf[5:8], "big")
            if len(self._buf) < 8 + length:
                break
            head, body = bytes(self._buf[:8]), bytes(self._buf[8 : 8 + length])
            del self._buf[: 8 + length]
            frames.append(self._parse(head, body))
        return frames

    def _parse(self, head: bytes, body: bytes) -> Frame:
        word, flags = struct.unpack(">I", head[:4])[0], head[4]
        if not word & 0x80000000:
            return Frame(0, flags, stream_id=word & 0x7FFFFFFF, payload=body)
        version, kind = (word >> 16) & 0x7FFF, word & 0xFFFF
        if version != VERSION:
            raise SpdyError(f"SPDY version {version}, not {VERSION}")
        if kind in (SYN_STREAM, SYN_REPLY, HEADERS):
            skip = 10 if kind == SYN_STREAM else 4
            if len(body) < skip:
                raise SpdyError("short header frame")
            sid = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF
            return Frame(kind, flags, stream_id=sid, headers=self._headers(body[skip:]))
        if kind in (RST_STREAM, WINDOW_UPDATE, GOAWAY) and len(body) >= 8:
            sid, value = struct.unpack(">II", body[:8])
            return Frame(kind, flags, stream_id=sid & 0x7FFFFFFF, value=value & 0x7FFFFFFF)
        if kind == PING and len(body) >= 4:
            return Frame(kind, flags, value=struct.unpack(">I", body[:4])[0])
        return Frame(kind, flags, payload=body)  # SETTINGS and anything newer: nothing to act on

    def _headers(self, block: bytes) -> tuple[tuple[str, str], ...]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as e:
            raise SpdyError(f"header block: {e}") from e
        out, pos = [], 4
        try:
            (count,) = struct.unpack(">I", raw[:4])
            for _ in range(count):
                values = []
                for _part in (0, 1):
                    (n,) = struct.unpack(">I", raw[pos : pos + 4])
                    values.append(raw[pos + 4 : pos + 4 + n].decode())
                    pos += 4 + n
                out += [(values[0].lower(), v) for v in values[1].split("\0")]
        except (struct.error, UnicodeDecodeError) as e:
            raise SpdyError(f"header block: {e}") from e
        return tuple(out)

    def _block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for k, v in headers.items():
            raw += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(kind: int, flags: int, body: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(body)) + body

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None, fin: bool = False) -> bytes:
        body = struct.pack(">I", stream_id) + self._block(headers or {})
        return self._control(SYN_REPLY, FLAG_FIN if fin else 0, body)

    @staticmethod
    def data(stream_id: int, payload: bytes, fin: bool = False) -> bytes:
        return struct.pack(">II", stream_id, ((FLAG_FIN if fin else 0) << 24) | len(payload)) + payload

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream, status))
