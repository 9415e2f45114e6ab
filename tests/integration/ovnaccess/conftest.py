"""A real standalone ovsdb-server (OVN_Northbound schema) per test, on loopback TLS (`pssl:`, its
certificate from a PKI made for the session, clients' certificates required) and a unix socket,
that a test can stop and start again on the same database file. This process's OVN client
identity is that PKI's `client` (ovnaccess.tls.use)."""

from __future__ import annotations

import logging
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.daemons import free_port
from nodeenv.ovn_pki import OvnPki
from nodeenv.ovn_stack import NB_SCHEMA
from ovnaccess import tls
from tests.conftest import require_ovn


class OvsdbServer:
    def __init__(self, workdir: Path, pki: OvnPki, identity: str = "ovsdb-server") -> None:
        self.dir, self.port = workdir, free_port()
        self.tls = pki.issue(identity, ["127.0.0.1"])
        self.db, self.sock = workdir / "nb.db", workdir / "nb.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        subprocess.run(["ovsdb-tool", "create", str(self.db), str(NB_SCHEMA)], check=True)

    @property
    def ssl(self) -> str:
        return f"ssl:127.0.0.1:{self.port}"

    @property
    def unix(self) -> str:
        return f"unix:{self.sock}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["ovsdb-server", str(self.db), f"--remote=pssl:{self.port}:127.0.0.1", *self.tls.ctl_flags(),
             f"--remote=punix:{self.sock}", f"--unixctl={self.dir / 'nb.ctl'}",
             f"--log-file={self.dir / 'nb.log'}"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"ovsdb-server did not listen on {self.ssl}; see {self.dir / 'nb.log'}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # as a crash: no goodbye to its clients
            self.proc.wait(10)
        self.proc = None

    def nbctl(self, *args: str) -> str:
        out = subprocess.run(["ovn-nbctl", f"--db={self.unix}", *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout


@pytest.fixture(scope="session")
def pki() -> Iterator[OvnPki]:
    """The session's OVN PKI; this process connects as its `client`."""
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-pki-", dir="/tmp"))
    out = OvnPki(workdir / "pki")
    tls.use(out.issue("client"))
    yield out
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def nb_server(pki: OvnPki) -> Iterator[OvsdbServer]:
    require_ovn()
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-nb-", dir="/tmp"))  # short: unix socket paths < 108 bytes
    server = OvsdbServer(workdir, pki)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def retry_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """ovnaccess's own log lines (INFO and above)."""
    caplog.set_level(logging.INFO, logger="ovnaccess")
    return caplog
