"""Debian's Prometheus server, started on loopback with its data under the run dir, stopped by PID.

`PrometheusServer(settings, config, table)` writes `<run_dir>/prometheus.yml` (checked with
`promtool check config` first: a bad config fails here with promtool's words, not as a server that
never gets ready), starts `prometheus` in the foreground recorded in `table` (the caller's node's
daemon table, so its `down()` stops it too), and waits for `/-/ready`. `reload()` rewrites the
config and POSTs `/-/reload`; `stop()` sends SIGTERM by PID (SIGKILL after the timeout). As a
context manager it stops on exit, and the server is its own session: a Ctrl-C of the caller does
not reach it, the caller's teardown does.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from nodeenv.daemons import DaemonError, DaemonTable, free_port, http_ready, start_foreground, wait_for
from nodeenv.prometheus.config import PrometheusConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrometheusSettings:
    run_dir: Path
    """Holds prometheus.yml, data/ (the TSDB) and prometheus.log."""
    host: str = "127.0.0.1"
    port: int = 0
    """0 = a free port, chosen at start."""
    binary: str = "prometheus"
    name: str = "prometheus"
    """Its name in the daemon table."""
    retention: str = "1d"
    extra_flags: tuple[str, ...] = field(default=())

    @property
    def config_file(self) -> Path:
        return self.run_dir / "prometheus.yml"

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "prometheus.log"


def require_binary(name: str) -> str:
    """The path of `name` (prometheus, promtool), or an error saying how to get it."""
    path = shutil.which(name)
    if path is None:
        raise DaemonError(f"{name} not found: install Debian's prometheus package (make setup)")
    return path


def check_config(config_file: Path) -> None:
    """`promtool check config`, which also checks the rule files it names; DaemonError with its output."""
    proc = subprocess.run([require_binary("promtool"), "check", "config", str(config_file)],
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        raise DaemonError(f"promtool check config {config_file}: {proc.stdout}{proc.stderr}".strip())


class PrometheusServer:
    def __init__(
        self, settings: PrometheusSettings, config: PrometheusConfig, table: DaemonTable | None = None
    ) -> None:
        self.settings = settings
        self.config = config
        self.table = table or DaemonTable(settings.run_dir / "daemons.json")
        self.port = settings.port

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    def write_config(self) -> Path:
        s = self.settings
        s.run_dir.mkdir(parents=True, exist_ok=True)
        s.config_file.write_text(self.config.to_yaml())
        os.chmod(s.config_file, 0o600)  # it may name credential files
        check_config(s.config_file)
        return s.config_file

    def start(self, timeout: float = 60.0) -> str:
        """Start the server and wait until it is ready; its base URL."""
        s = self.settings
        self.write_config()
        s.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = s.port or free_port()
        argv = [
            require_binary(s.binary),
            f"--config.file={s.config_file}",
            f"--storage.tsdb.path={s.data_dir}",
            f"--storage.tsdb.retention.time={s.retention}",
            f"--web.listen-address={s.host}:{self.port}",
            "--web.enable-lifecycle",  # /-/reload after the targets or rules change
            *s.extra_flags,
        ]
        _, proc = start_foreground(s.name, argv, s.log_file, dict(os.environ), self.table)
        try:
            wait_for(
                lambda: http_ready(f"{self.url}/-/ready"), f"prometheus ready at {self.url}", timeout, proc
            )
        except DaemonError as e:
            self.stop()
            tail = s.log_file.read_text(errors="replace").splitlines()[-10:]
            raise DaemonError(f"{e}; last lines of {s.log_file}:\n  " + "\n  ".join(tail)) from None
        log.info("prometheus ready at %s (config %s)", self.url, s.config_file)
        return self.url

    def reload(self, config: PrometheusConfig | None = None) -> None:
        """Rewrite the config (a new one if given) and have the running server re-read it."""
        if config is not None:
            self.config = config
        self.write_config()
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            if r.status != 200:
                raise DaemonError(f"prometheus reload answered {r.status}")

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM by PID (recorded at start), SIGKILL after `timeout`; False if it was not running."""
        return self.table.stop(self.settings.name, timeout)

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
