"""kubelet's remote command protocol over WebSocket (`v5.channel.k8s.io` and its predecessors down
to `channel.k8s.io`), for exec and attach: every binary message starts with its channel -- 0 stdin,
1 stdout, 2 stderr, 3 error, 4 resize, and (v5) 255 "close this stream" with the stream's number.
When the command ends, the error channel carries a `Status` (v4 and v5): Success, or Failure with
reason NonZeroExitCode and the exit code as an `ExitCode` cause, which kubectl turns into its own
exit code; before v4 it carries the error text alone. Then the connection is closed.

The command itself is a podman process (`podman exec`, `podman attach`) run on this node."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import WSMsgType, web

from nodeenv.kubelet.kubeletapi import processio
from nodeenv.kubelet.kubeletapi.processio import ProcessIo

log = logging.getLogger(__name__)
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io",
             "channel.k8s.io")  # fmt: skip
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
CHUNK = 32 * 1024


def exit_status(code: int, argv: Sequence[str]) -> dict[str, Any]:
    """The error channel's Status, as kubelet's exec writes it."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {}, "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command {list(argv)}, "
        f"exit code {code}",
        "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }  # fmt: skip


def wants_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def _pump(stream: asyncio.StreamReader, channel: int, ws: web.WebSocketResponse) -> None:
    with contextlib.suppress(OSError):  # a terminal's end reads EIO once the command is gone
        while chunk := await stream.read(CHUNK):
            if ws.closed:
                return
            await ws.send_bytes(bytes([channel]) + chunk)


async def _client(ws: web.WebSocketResponse, io: ProcessIo) -> None:
    """The client's messages: stdin to the command, closed on v5's close signal; the terminal's size.
    Returns when the client hangs up."""
    async for msg in ws:
        if msg.type != WSMsgType.BINARY or not msg.data:
            continue
        channel, data = msg.data[0], msg.data[1:]
        if channel == STDIN:
            await io.write(data)
        elif channel == CLOSE and data[:1] == bytes([STDIN]):
            io.close_stdin()
        elif channel == RESIZE:
            with contextlib.suppress(ValueError, KeyError, TypeError, OSError):
                size = json.loads(data)
                io.resize(int(size["Width"]), int(size["Height"]))


async def stream_command(
    request: web.Request, argv: Sequence[str], env: Mapping[str, str], *, stdin: bool, shown: Sequence[str],
    tty: bool = False,
) -> web.WebSocketResponse:  # fmt: skip
    """Run `argv` with its output on the WebSocket; `shown` is the command as the user gave it."""
    ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=0, autoping=True)
    await ws.prepare(request)
    io = await processio.start(argv, env, stdin=stdin, tty=tty)
    reader: asyncio.Future[Any] = asyncio.ensure_future(_client(ws, io))
    pumps: asyncio.Future[Any] = asyncio.gather(*(_pump(s, ch, ws) for s, ch in io.outputs))
    done, _ = await asyncio.wait({reader, pumps}, return_when=asyncio.FIRST_COMPLETED)
    if reader in done and pumps not in done:  # the client hung up first: the command goes too
        with contextlib.suppress(ProcessLookupError):
            io.proc.kill()
    code = await io.proc.wait()
    if tty:  # its terminal may be held open by what the command left behind
        await asyncio.wait({pumps}, timeout=1)
        io.close()
        if not pumps.done():
            pumps.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pumps
    if not ws.closed:
        if ws.ws_protocol in PROTOCOLS[:2]:
            await ws.send_bytes(bytes([ERROR]) + json.dumps(exit_status(code, shown)).encode())
        elif code:
            await ws.send_bytes(bytes([ERROR]) + f"command terminated with exit code {code}".encode())
        await ws.close()
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    log.info("%s: exit %d", " ".join(shown)[:200], code)
    return ws
