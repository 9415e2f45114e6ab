"""`/containerLogs/{namespace}/{pod}/{container}`: a container's log as kubelet serves it, from
`podman logs` (stdout and stderr as one stream), with kubelet's query parameters: follow,
previous, tailLines, sinceSeconds, sinceTime (RFC 3339), timestamps, limitBytes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Mapping

from aiohttp import web

from nodeenv.kubelet.kubeletapi.pods import KubeletError, LogSource

log = logging.getLogger(__name__)


def flag(query: Mapping[str, str], key: str) -> bool:
    return query.get(key, "").lower() in ("1", "true")


def count(query: Mapping[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None:
        return None
    if not raw.lstrip("-").isdigit():
        raise KubeletError(400, f'{key}: invalid value "{raw}"')
    return int(raw)


def log_argv(source: LogSource, query: Mapping[str, str]) -> list[str]:
    """The command that prints the log as asked."""
    tail, since_s = count(query, "tailLines"), count(query, "sinceSeconds")
    follow = flag(query, "follow")
    if source.file is not None:  # a stand-in's log file: tail(1) follows and cuts it
        return ["tail", "-n", str(tail if tail is not None else "+1"), *(["-F"] if follow else []),
                str(source.file)]  # fmt: skip
    argv = ["podman", "logs"]
    if follow:
        argv.append("--follow")
    if tail is not None:
        argv += ["--tail", str(max(tail, 0))]
    if since_s is not None:
        argv += ["--since", f"{max(since_s, 1)}s"]
    elif query.get("sinceTime"):
        argv += ["--since", query["sinceTime"]]
    if flag(query, "timestamps"):
        argv.append("--timestamps")
    return [*argv, source.podman_ref]


PODMAN_MESSAGE = re.compile(rb'^time="[^"]*" level=\w+ msg=')
"""podman's own diagnostics on its stderr (logrus), which is also where the container's stderr goes."""


async def _lines(stream: asyncio.StreamReader, out: asyncio.Queue[bytes | None], stderr: bool) -> None:
    while line := await stream.readline():
        if stderr and PODMAN_MESSAGE.match(line):
            log.warning("podman logs: %s", line.decode(errors="replace").strip())
            continue
        await out.put(line)
    await out.put(None)


async def stream_log(
    request: web.Request, argv: list[str], env: Mapping[str, str], limit: int | None
) -> web.StreamResponse:
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(*argv, stdout=pipe, stderr=pipe, env=dict(env), limit=1 << 24)
    assert proc.stdout is not None and proc.stderr is not None
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    readers = [asyncio.ensure_future(_lines(proc.stdout, queue, False)),
               asyncio.ensure_future(_lines(proc.stderr, queue, True))]  # fmt: skip
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    left, open_streams = limit, 2
    try:
        while open_streams and left != 0:
            line = await queue.get()
            if line is None:
                open_streams -= 1
                continue
            if left is not None:
                line, left = line[:left], left - len(line[:left])
            await resp.write(line)
    finally:
        for r in readers:
            r.cancel()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
    await resp.write_eof()
    return resp
