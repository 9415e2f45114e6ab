"""Starting and stopping daemons by PID, and remembering which ones we started.

Each daemon the node environment starts is recorded in `<run>/daemons.json` with its
PID and the executable it runs, so that `down` stops exactly those processes (and
never a recycled PID that now belongs to something else).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from nodeenv.netns_socket import connected_socket

log = logging.getLogger(__name__)


class DaemonError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class DaemonRecord:
    name: str
    pid: int
    exe: str  # basename of argv[0], checked against /proc/<pid>/cmdline before signalling


def is_alive(rec: DaemonRecord) -> bool:
    try:
        cmdline = Path(f"/proc/{rec.pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{rec.pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":  # zombie: exited, not yet reaped
        return False
    return rec.exe.encode() in cmdline


class DaemonTable:
    """The persistent list of daemons one node environment started, in start order."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def load(self) -> list[DaemonRecord]:
        try:
            return [DaemonRecord(**d) for d in json.loads(self._path.read_text())]
        except FileNotFoundError:
            return []

    def add(self, rec: DaemonRecord) -> None:
        self._save([r for r in self.load() if r.name != rec.name] + [rec])

    def stop(self, name: str, timeout: float = 10.0) -> bool:
        """Stop the daemon recorded as `name` and forget it, so the node stays `is_up()`."""
        records = self.load()
        stopped = any([stop(r, timeout) for r in records if r.name == name])
        self._save([r for r in records if r.name != name])
        return stopped

    def _save(self, records: list[DaemonRecord]) -> None:
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(r) for r in records], indent=1))
        tmp.replace(self._path)

    def stop_all(self, timeout: float = 10.0) -> list[str]:
        """SIGTERM every recorded daemon, newest first; SIGKILL what outlives `timeout`."""
        stopped = []
        for rec in reversed(self.load()):
            if stop(rec, timeout):
                stopped.append(rec.name)
        self._path.unlink(missing_ok=True)
        return stopped


def stop(rec: DaemonRecord, timeout: float = 10.0) -> bool:
    if not is_alive(rec):
        return False
    os.kill(rec.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(rec):
            return True
        time.sleep(0.02)
    log.warning("%s (pid %d) ignored SIGTERM for %.0fs; killing", rec.name, rec.pid, timeout)
    os.kill(rec.pid, signal.SIGKILL)
    return True


def run_checked(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=dict(env) if env else None, cwd=cwd)
    if proc.returncode != 0:
        raise DaemonError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def in_netns(netns: str, argv: Sequence[str], *, host_mounts: bool = False) -> list[str]:
    """`argv` run in the named network namespace ("" = this one). `ip netns exec` execs the program
    in place (same PID) with the namespace's own /sys, so PIDs and /sys/class/net stay right; it
    does so in a mount namespace of its own, so what the program mounts is not seen here.
    `host_mounts`: `nsenter --net` instead (also in place), keeping this mount namespace, so its
    mounts are everyone's (a CSI node plugin's, as its DaemonSet's Bidirectional propagation)."""
    if not netns:
        return list(argv)
    return (
        ["nsenter", f"--net=/run/netns/{netns}", *argv]
        if host_mounts
        else ["ip", "netns", "exec", netns, *argv]
    )


def start_detaching(
    name: str,
    argv: Sequence[str],
    pidfile: Path,
    env: Mapping[str, str],
    table: DaemonTable,
    netns: str = "",
) -> DaemonRecord:
    """Start an OVS/OVN daemon that daemonizes itself (--detach --pidfile), in `netns` if given.

    It may dump core (RLIMIT_CORE unlimited, set by prlimit for it alone) and stays in the pidfile's
    directory (--no-chdir), where a relative kernel.core_pattern puts the core (nodeenv.evidence)."""
    pidfile.unlink(missing_ok=True)
    detach = [f"--pidfile={pidfile}", "--detach", "--no-chdir"]
    run_checked(
        in_netns(netns, ["prlimit", "--core=unlimited", "--", *argv, *detach]), env, cwd=pidfile.parent
    )
    rec = DaemonRecord(name=name, pid=int(pidfile.read_text().strip()), exe=Path(argv[0]).name)
    table.add(rec)
    return rec


def start_foreground(
    name: str,
    argv: Sequence[str],
    logfile: Path,
    env: Mapping[str, str],
    table: DaemonTable,
    netns: str = "",
    *,
    host_mounts: bool = False,
) -> tuple[DaemonRecord, subprocess.Popen[bytes]]:
    """Start one of the suite's own daemons in its own session (in `netns` if given; see in_netns
    for `host_mounts`), output to `logfile`."""
    with logfile.open("ab") as out:
        proc = subprocess.Popen(
            in_netns(netns, argv, host_mounts=host_mounts),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
    rec = DaemonRecord(name=name, pid=proc.pid, exe=Path(argv[0]).name)
    table.add(rec)
    return rec, proc


def wait_for(
    predicate: Callable[[], bool],
    what: str,
    timeout: float = 15.0,
    proc: subprocess.Popen[bytes] | None = None,
) -> None:
    """Poll `predicate()` until true; fail early if `proc` exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise DaemonError(f"{what}: process exited with {proc.returncode}")
        time.sleep(0.02)
    raise DaemonError(f"timed out after {timeout:.0f}s waiting for {what}")


def unix_listening(path: Path) -> bool:
    """Whether a daemon accepts connections on the unix socket `path` (for wait_for)."""
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A free TCP port on loopback (for a daemon's metrics/health address)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_ready(url: str, cafile: Path | None = None) -> bool:
    """Whether GET `url` (a daemon's /readyz) answers 200 (for wait_for)."""
    ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    try:
        with urllib.request.urlopen(url, timeout=1, context=ctx) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def http_get_in(netns: str, url: str, timeout: float = 1.0) -> tuple[int, str]:
    """GET `url` (plain HTTP) from inside the named network namespace (a daemon on a cluster
    node's own loopback): its status and body."""
    u = urllib.parse.urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.sock = connected_socket(netns, host, port, timeout)
    try:
        conn.request("GET", u.path or "/")
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def http_ready_in(netns: str, url: str) -> bool:
    """Whether GET `url` answers 200 from inside `netns` (for wait_for)."""
    try:
        return http_get_in(netns, url)[0] == 200
    except (OSError, http.client.HTTPException):
        return False
