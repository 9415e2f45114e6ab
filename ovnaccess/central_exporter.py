"""ovn-central-exporter: Prometheus figures of one OVN central member, which OVN does not export.

It runs beside a member (a container of the ovn-central pod, sharing its run directory) and asks
the member's daemons over their control sockets at each scrape: the NB and SB ovsdb-servers their
RAFT role, term, commit index and cluster size and whether it is in RAFT's failure mode (an I/O
error such as a full disk), ovn-northd whether it is active; and the size of each database file and
the space left on its filesystem (docs/database-bounds.md). `/metrics`,
`/healthz` on `--metrics-address`. Flags: `ovn-central-exporter --help` (env fallbacks shown).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from common.jsonlog import setup_logging
from ovnaccess.central_status import (
    NORTHD_STATES,
    ROLES,
    RaftStatus,
    UnixctlError,
    UnixctlRefused,
    call,
    parse_cluster_status,
    parse_northd_status,
)

log = logging.getLogger("ovn-central-exporter")
PREFIX = "OVN_CENTRAL_EXPORTER_"
DATABASES = {"nb": "OVN_Northbound", "sb": "OVN_Southbound"}


@dataclass(frozen=True, slots=True)
class ExporterSettings:
    nb_ctl: Path | None
    sb_ctl: Path | None
    northd: Path | None
    db_files: dict[str, Path]
    """nb, sb -> the member's database file (its size and its filesystem's free space exported)."""
    metrics_address: str
    timeout: float

    @classmethod
    def parse(cls, argv: Sequence[str], env: Mapping[str, str]) -> ExporterSettings:
        p = argparse.ArgumentParser(prog="ovn-central-exporter", description=__doc__)
        for flag, default, what in (
            ("nb-ctl", "/var/run/ovn/ovnnb_db.ctl", "the NB ovsdb-server's control socket"),
            ("sb-ctl", "/var/run/ovn/ovnsb_db.ctl", "the SB ovsdb-server's control socket"),
            ("northd", "/var/run/ovn/ovn-northd.pid", "ovn-northd's control socket, or its pidfile"),
        ):
            var = PREFIX + flag.upper().replace("-", "_")
            p.add_argument(f"--{flag}", default=env.get(var, default),
                           help=f"{what}; '' to leave it out (env {var}; default {default})")  # fmt: skip
        for key in DATABASES:
            var, default = PREFIX + f"{key.upper()}_DB", f"/var/lib/ovn/ovn{key}_db.db"
            p.add_argument(f"--{key}-db", default=env.get(var, default),
                           help=f"the {key.upper()} database file; '' to leave it out (env {var}; "
                                f"default {default})")  # fmt: skip
        var = PREFIX + "METRICS_ADDRESS"
        p.add_argument("--metrics-address", default=env.get(var, "127.0.0.1:9476"),
                       help=f"host:port of /metrics (env {var}; default 127.0.0.1:9476)")  # fmt: skip
        var = PREFIX + "TIMEOUT"
        p.add_argument("--timeout", type=float, default=float(env.get(var, "5")),
                       help=f"seconds a daemon may take to answer (env {var}; default 5)")  # fmt: skip
        a = p.parse_args(argv)
        return cls(
            nb_ctl=Path(a.nb_ctl) if a.nb_ctl else None,
            sb_ctl=Path(a.sb_ctl) if a.sb_ctl else None,
            northd=Path(a.northd) if a.northd else None,
            db_files={k: Path(f) for k in DATABASES if (f := getattr(a, f"{k}_db"))},
            metrics_address=a.metrics_address,
            timeout=a.timeout,
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape's answers."""

    up: dict[str, bool]
    """nb, sb, northd (those asked) -> whether the daemon answered."""
    raft: dict[str, RaftStatus]
    """nb, sb -> its RAFT state (absent: no answer, or a standalone database)."""
    northd: str | None
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    """nb, sb -> (its database file's bytes, bytes free on its filesystem), for those readable."""


class CentralCollector(Collector):
    """The families of one scrape's snapshot (a registry per scrape: concurrent scrapes never mix)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        up = GaugeMetricFamily(
            "ovn_central_up", "1 when the daemon answered its control socket", labels=["target"]
        )
        role = GaugeMetricFamily(
            "ovn_raft_role", "1 for this member's RAFT role", labels=["database", "role"]
        )
        term = GaugeMetricFamily("ovn_raft_term", "This member's RAFT term", labels=["database"])
        commit = GaugeMetricFamily("ovn_raft_commit_index", "This member's commit index", labels=["database"])
        servers = GaugeMetricFamily("ovn_raft_cluster_servers", "Servers in the cluster", labels=["database"])
        failed = GaugeMetricFamily(
            "ovn_raft_failed",
            "1 while this member is in RAFT's failure mode (an I/O error: restart it)",
            labels=["database"],
        )
        size = GaugeMetricFamily(
            "ovn_db_file_bytes", "Size of this member's database file", labels=["database"]
        )
        free = GaugeMetricFamily(
            "ovn_db_filesystem_free_bytes",
            "Bytes free (to root) on the database file's filesystem",
            labels=["database"],
        )
        for key, (file_bytes, free_bytes) in s.files.items():
            size.add_metric([DATABASES[key]], file_bytes)
            free.add_metric([DATABASES[key]], free_bytes)
        for target, answered in s.up.items():
            up.add_metric([target], 1.0 if answered else 0.0)
        for key, status in s.raft.items():
            db = DATABASES[key]
            for r in ROLES:
                role.add_metric([db, r], 1.0 if status.role == r else 0.0)
            term.add_metric([db], status.term)
            commit.add_metric([db], status.commit_index)
            servers.add_metric([db], status.servers)
            failed.add_metric([db], 1.0 if status.failed else 0.0)
        northd = GaugeMetricFamily("ovn_northd_status", "1 for this northd's state", labels=["state"])
        if s.northd is not None:
            for state in NORTHD_STATES:
                northd.add_metric([state], 1.0 if s.northd == state else 0.0)
        yield from (up, role, term, commit, servers, failed, size, free, northd)


async def ask(settings: ExporterSettings) -> Snapshot:
    async def answer(target: Path, *command: str) -> str | None:
        """The answer; '' when the daemon answered with an error; None when it did not answer."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(call, target, *command), settings.timeout)
        except UnixctlRefused as e:
            log.debug("%s", e)
            return ""
        except (UnixctlError, OSError, TimeoutError) as e:
            log.warning("%s did not answer %s: %s", target, command[0], e)
            return None

    up: dict[str, bool] = {}
    raft: dict[str, RaftStatus] = {}
    for key, ctl in (("nb", settings.nb_ctl), ("sb", settings.sb_ctl)):
        if ctl is None:
            continue
        text = await answer(ctl, "cluster/status", DATABASES[key])
        up[key] = text is not None
        try:
            if text:  # '' from a standalone database: it answers, but has no RAFT to report
                raft[key] = parse_cluster_status(text)
        except UnixctlError as e:
            log.warning("%s", e)
    northd = None
    if settings.northd is not None:
        text = await answer(settings.northd, "status")
        up["northd"] = text is not None
        try:
            northd = parse_northd_status(text) if text else None
        except UnixctlError as e:
            log.warning("%s", e)
    return Snapshot(up, raft, northd, file_sizes(settings.db_files))


def file_sizes(files: Mapping[str, Path]) -> dict[str, tuple[int, int]]:
    """key -> (the file's bytes, bytes free on its filesystem) for each file that can be read."""
    out = {}
    for key, path in files.items():
        try:
            st = os.statvfs(path)
            out[key] = (path.stat().st_size, st.f_bfree * st.f_frsize)
        except OSError as e:
            log.warning("cannot stat database file %s: %s", path, e)
    return out


def render(snapshot: Snapshot) -> bytes:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(CentralCollector(snapshot))
    return bytes(generate_latest(registry))


def make_app(settings: ExporterSettings) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=render(await ask(settings)), content_type="text/plain")

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    return app


async def serve(settings: ExporterSettings) -> None:
    host, _, port = settings.metrics_address.rpartition(":")
    runner = web.AppRunner(make_app(settings), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    log.info("serving /metrics on %s", settings.metrics_address, extra={"address": settings.metrics_address})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    settings = ExporterSettings.parse(sys.argv[1:] if argv is None else argv, os.environ)
    setup_logging()
    asyncio.run(serve(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
