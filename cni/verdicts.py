"""Policy verdicts on the node: ovn-controller's log followed, each ACL log line → one JSON log line
(logger `prismnet.verdict`) and a count in `prismnet_policy_verdicts_total{namespace,policy,verdict}`.

The follower polls the file (every POLL s): it starts at the end (no replay of old lines after a
restart), reads what was appended, and when the file is rotated (a new inode at the path) or
truncated (shorter than what was read) it finishes the old file and starts the new one from its
beginning. A partial last line waits for its newline.

Labels are bounded: namespace and policy names are written by tenants and admins, so at most
`max_series` (namespace, policy, verdict) label sets are counted as themselves; events of any
further set are counted under namespace="_other", policy="_other" (one series per verdict) and in
`prismnet_policy_verdict_series_folded_total`. The JSON log always has the real names. Drops may
also become Events in their namespace (cni/verdict_events.py), for the tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from prometheus_client import CollectorRegistry, Counter

from cni.acl_log import Verdict, parse_line
from cni.verdict_events import DropEvents

log = logging.getLogger("prismnet.verdict")
POLL = 0.2
OTHER = "_other"
MAX_LINE = 65536


class VerdictCounters:
    def __init__(self, registry: CollectorRegistry, max_series: int = 500) -> None:
        self.max_series = max_series
        self._seen: set[tuple[str, str, str]] = set()
        self.verdicts = Counter(
            "prismnet_policy_verdicts",
            "Packets logged by policy ACLs (rate-limited by the acl-logging meter), by the policy's "
            "namespace, policy reference and verdict; label sets beyond the cap count as _other",
            ["namespace", "policy", "verdict"],
            registry=registry,
        )
        self.folded = Counter(
            "prismnet_policy_verdict_series_folded",
            "Logged packets counted under namespace=_other,policy=_other (label-set cap reached)",
            registry=registry,
        )

    def count(self, v: Verdict) -> None:
        key = (v.namespace, v.acl or v.policy, v.verdict)
        if key not in self._seen:
            if len(self._seen) >= self.max_series:
                self.folded.inc()
                self.verdicts.labels(OTHER, OTHER, v.verdict).inc()
                return
            self._seen.add(key)
        self.verdicts.labels(*key).inc()


class LogFollower:
    """Lines appended to `path` (which may not exist yet), across rotation and truncation."""

    def __init__(self, path: Path, *, from_start: bool = False) -> None:
        self.path = path
        self._f: IO[bytes] | None = None
        self._ino: int | None = None
        self._partial = b""
        self._from_start = from_start

    def read(self) -> list[str]:
        """Complete lines appended since the last call."""
        lines: list[str] = []
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if self._f is not None and (st is None or st.st_ino != self._ino or st.st_size < self._f.tell()):
            lines += self._drain()  # rotated or truncated: the rest of the old file first
            self._f.close()
            self._f, self._partial, self._from_start = None, b"", True
        if self._f is None and st is not None:
            self._f, self._ino = open(self.path, "rb"), st.st_ino  # noqa: SIM115 (kept open across calls)
            if not self._from_start:
                self._f.seek(0, os.SEEK_END)
        if self._f is not None:
            lines += self._drain()
        return lines

    def _drain(self) -> list[str]:
        assert self._f is not None
        data = self._partial + self._f.read()
        *done, self._partial = data.split(b"\n")
        if len(self._partial) > MAX_LINE:  # no newline in sight: not a log line we want
            self._partial = b""
        return [d.decode(errors="replace") for d in done]

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def handle(
    lines: list[str], counters: VerdictCounters, namespace_of: Callable[[str], str] | None
) -> list[Verdict]:
    """Each ACL log line → a JSON log line and a count; the verdicts seen."""
    out = []
    for line in lines:
        v = parse_line(line)
        if v is None:
            continue
        if not v.namespace and namespace_of is not None:  # cluster-scoped policies: the judged pod's
            ns = namespace_of(v.dst if v.direction == "ingress" else v.src)
            v = dataclasses.replace(v, namespace=ns) if ns else v
        counters.count(v)
        log.info("policy verdict", extra=v.fields())
        out.append(v)
    return out


async def follow(
    path: Path,
    counters: VerdictCounters,
    stop: asyncio.Event,
    namespace_of: Callable[[str], str] | None = None,
    poll: float = POLL,
    events: DropEvents | None = None,
) -> None:
    """Until `stop`: read `path`'s new lines every `poll` s and handle them (drops also as Events)."""
    follower = LogFollower(path)
    log.info("following ovn-controller's ACL log lines in %s", path)
    try:
        while not stop.is_set():
            try:
                lines = await asyncio.to_thread(follower.read)
                seen = await asyncio.to_thread(handle, lines, counters, namespace_of) if lines else []
                if events is not None:
                    for v in seen:
                        await events.record(v)
            except OSError as e:
                log.warning("reading %s: %s", path, e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll)
    finally:
        follower.close()
        if events is not None:
            await events.close()
