"""`/containerLogs/{namespace}/{pod}/{container}`: a container's log as kubelet serves it, from
`podman logs` (stdout and stderr as one stream), with kubelet's query parameters: follow,
previous, tailLines, sinceSeconds, sinceTime (RFC 3339), timestamps, limitBytes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from aiohttp import web

from nodeenv.kubelet.kubeletapi.pods import KubeletError, LogSource

CHUNK = 32 * 1024


def _true(query: Mapping[str, str], key: str) -> bool:
    return query.get(key, "").lower() in ("1", "true")


def _count(query: Mapping[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None:
        return None
    if not raw.lstrip("-").isdigit():
        raise KubeletError(400, f'{key}: invalid value "{raw}"')
    return int(raw)


def log_argv(source: LogSource, query: Mapping[str, str]) -> list[str]:
    """The command that prints the log as asked."""
    tail, since_s = _count(query, "tailLines"), _count(query, "sinceSeconds")
    follow = _true(query, "follow")
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
    if _true(query, "timestamps"):
        argv.append("--timestamps")
    return [*argv, source.podman_ref]


async def stream_log(
    request: web.Request, argv: list[str], env: Mapping[str, str], limit: int | None
) -> web.StreamResponse:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT, env=dict(env))  # fmt: skip
    assert proc.stdout is not None
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    left = limit
    try:
        while chunk := await proc.stdout.read(CHUNK):
            if left is not None:
                chunk, left = chunk[:left], left - len(chunk[:left])
            await resp.write(chunk)
            if left == 0:
                break
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
    await resp.write_eof()
    return resp
