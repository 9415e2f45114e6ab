"""A clustered NB replaced by a new, empty one (wiped, created again on the same address): an
ovnaccess connection follows it instead of calling it stale forever, says so, and runs the replaced
hooks once the new database is monitored, its replica emptied and writable again."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.daemons import free_port
from nodeenv.ovn_central import NB_SCHEMA
from nodeenv.ovn_pki import OvnPki
from ovnaccess.commands import read, table_rows
from ovnaccess.connection import connect
from tests.conftest import require_ovn


class ClusteredNb:
    """A one-member clustered NB (RAFT over TLS, as the suite's), clients on a unix socket."""

    def __init__(self, workdir: Path, pki: OvnPki) -> None:
        self.dir, self.raft = workdir, f"ssl:127.0.0.1:{free_port()}"
        self.tls = pki.issue("ovsdb-server-nb1", ["127.0.0.1"])
        self.db, self.sock = workdir / "nb1.db", workdir / "nb1.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def create(self) -> None:
        self.db.unlink(missing_ok=True)
        subprocess.run(["ovsdb-tool", "create-cluster", str(self.db), str(NB_SCHEMA), self.raft], check=True)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["ovsdb-server", str(self.db), f"--remote=punix:{self.sock}", *self.tls.ctl_flags(),
             f"--unixctl={self.dir / 'nb1.ctl'}", f"--log-file={self.dir / 'nb1.log'}"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def cid(self) -> str:
        return subprocess.run(
            ["ovsdb-tool", "db-cid", str(self.db)], capture_output=True, text=True
        ).stdout.strip()

    def nbctl(self, *args: str) -> str:
        out = subprocess.run(["ovn-nbctl", f"--db=unix:{self.sock}", *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout


@pytest.fixture
def clustered(pki: OvnPki) -> Iterator[ClusteredNb]:
    require_ovn()
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-nbc-", dir="/tmp"))
    server = ClusteredNb(workdir, pki)
    server.create()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_replaced_database_is_followed_and_announced(clustered: ClusteredNb) -> None:
    for i in range(30):  # the old database's RAFT index well above the new one's
        clustered.nbctl("ls-add", f"old{i}")
    db = connect(f"unix:{clustered.sock}", "OVN_Northbound", {"Logical_Switch": None})
    replaced = threading.Event()
    db.on_replaced(replaced.set)
    try:
        names = read(db.api, lambda api: sorted(r.name for r in table_rows(api, "Logical_Switch")))
        assert len(names) == 30
        old = clustered.cid()
        clustered.stop()
        clustered.create()
        clustered.start()
        assert clustered.cid() != old
        assert replaced.wait(20), "the replaced hook did not run within 20 s of the new database"
        assert db.idl.replaced == 1
        assert read(db.api, lambda api: table_rows(api, "Logical_Switch")) == []
        db.api.ls_add("new").execute(check_error=True)
        assert clustered.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split() == ["new"]
    finally:
        db.stop()


class StandaloneNb:
    """A standalone NB on a unix socket (the sandbox's central): no cluster id to tell a new file by."""

    def __init__(self, workdir: Path) -> None:
        self.dir, self.db, self.sock = workdir, workdir / "nb.db", workdir / "nb.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def create(self) -> None:
        self.db.unlink(missing_ok=True)
        subprocess.run(["ovsdb-tool", "create", str(self.db), str(NB_SCHEMA)], check=True)

    def start(self) -> None:
        self.sock.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            ["ovsdb-server", str(self.db), f"--remote=punix:{self.sock}", f"--unixctl={self.dir / 'nb.ctl'}",
             f"--log-file={self.dir / 'nb.log'}"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def nbctl(self, *args: str) -> str:
        out = subprocess.run(["ovn-nbctl", f"--db=unix:{self.sock}", *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout


@pytest.fixture
def standalone() -> Iterator[StandaloneNb]:
    require_ovn()
    workdir = Path(tempfile.mkdtemp(prefix="k8sh-nbs-", dir="/tmp"))
    server = StandaloneNb(workdir)
    server.create()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_replaced_standalone_database_is_told_from_a_restarted_one(standalone: StandaloneNb) -> None:
    """Restarted on its file: reconnected, not replaced. Its file replaced by a new empty one (what
    nodeenv/cluster/db_wipe.py does to the sandbox's NB): the replaced hooks run, the replica empty."""
    standalone.nbctl("init")  # NB_Global, as ovn-northd inserts it
    standalone.nbctl("ls-add", "old")
    db = connect(f"unix:{standalone.sock}", "OVN_Northbound", {"Logical_Switch": None})
    replaced = threading.Event()
    db.on_replaced(replaced.set)
    try:
        assert read(db.api, lambda api: [r.name for r in table_rows(api, "Logical_Switch")]) == ["old"]
        standalone.stop()
        standalone.start()
        deadline = time.monotonic() + 20
        while db.idl.reconnects < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert db.idl.reconnects == 1, "did not reconnect to the restarted server"
        time.sleep(0.5)
        assert not replaced.is_set() and db.idl.replaced == 0, "a restart on the same file taken as replaced"
        standalone.stop()
        standalone.create()
        standalone.start()
        assert replaced.wait(20), "the replaced hook did not run within 20 s of the new database"
        assert db.idl.replaced == 1
        assert read(db.api, lambda api: table_rows(api, "Logical_Switch")) == []
        db.api.ls_add("new").execute(check_error=True)
        assert standalone.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split() == ["new"]
    finally:
        db.stop()
