"""A clustered NB replaced by a new, empty one (wiped, created again on the same address): an
ovnaccess connection follows it instead of calling it stale forever, says so, and runs the replaced
hooks once the new database is monitored, its replica emptied and writable again. A standalone NB
the same (told by its NB_Global row), and not when its server merely restarts on its file."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from nodeenv.daemons import free_port
from nodeenv.ovn_central import NB_SCHEMA
from nodeenv.ovn_pki import OvnPki
from ovnaccess.commands import read, table_rows
from ovnaccess.connection import Ovsdb, connect
from tests.conftest import require_ovn

S = TypeVar("S", bound="NbServer")


class NbServer:
    """An NB ovsdb-server in `workdir`, clients on a unix socket; `create` makes its file anew."""

    def __init__(self, workdir: Path, label: str, flags: list[str]) -> None:
        self.dir, self.label, self.flags = workdir, label, flags
        self.db, self.sock = workdir / f"{label}.db", workdir / f"{label}.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def create(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self.sock.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            ["ovsdb-server", str(self.db), f"--remote=punix:{self.sock}", *self.flags,
             f"--unixctl={self.dir / f'{self.label}.ctl'}", f"--log-file={self.dir / f'{self.label}.log'}"],
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


class ClusteredNb(NbServer):
    """A one-member clustered NB (RAFT over TLS, as the suite's)."""

    def __init__(self, workdir: Path, pki: OvnPki) -> None:
        super().__init__(workdir, "nb1", pki.issue("ovsdb-server-nb1", ["127.0.0.1"]).ctl_flags())
        self.raft = f"ssl:127.0.0.1:{free_port()}"

    def create(self) -> None:
        self.db.unlink(missing_ok=True)
        subprocess.run(["ovsdb-tool", "create-cluster", str(self.db), str(NB_SCHEMA), self.raft], check=True)

    def cid(self) -> str:
        return subprocess.run(
            ["ovsdb-tool", "db-cid", str(self.db)], capture_output=True, text=True
        ).stdout.strip()


class StandaloneNb(NbServer):
    """A standalone NB (the sandbox's central): no cluster id to tell a new file by."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "nb", [])

    def create(self) -> None:
        self.db.unlink(missing_ok=True)
        subprocess.run(["ovsdb-tool", "create", str(self.db), str(NB_SCHEMA)], check=True)


def running(server: S) -> Iterator[S]:
    """`server` with a new file, started; stopped and its directory removed after."""
    require_ovn()
    server.create()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture
def clustered(pki: OvnPki) -> Iterator[ClusteredNb]:
    yield from running(ClusteredNb(Path(tempfile.mkdtemp(prefix="k8sh-nbc-", dir="/tmp")), pki))


@pytest.fixture
def standalone() -> Iterator[StandaloneNb]:
    yield from running(StandaloneNb(Path(tempfile.mkdtemp(prefix="k8sh-nbs-", dir="/tmp"))))


def watching(server: NbServer) -> tuple[Ovsdb, threading.Event]:
    """A connection to `server`'s NB (Logical_Switch) and an event its replaced hooks set."""
    db = connect(f"unix:{server.sock}", "OVN_Northbound", {"Logical_Switch": None})
    replaced = threading.Event()
    db.on_replaced(replaced.set)
    return db, replaced


def replaced_and_followed(server: NbServer, db: Ovsdb, replaced: threading.Event) -> None:
    """`server`'s file made anew: the hooks ran once, the replica is empty, a write lands in the new file."""
    server.stop()
    server.create()
    server.start()
    assert replaced.wait(20), "the replaced hook did not run within 20 s of the new database"
    assert db.idl.replaced == 1
    assert read(db.api, lambda api: table_rows(api, "Logical_Switch")) == []
    db.api.ls_add("new").execute(check_error=True)
    assert server.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split() == ["new"]


def test_a_replaced_database_is_followed_and_announced(clustered: ClusteredNb) -> None:
    for i in range(30):  # the old database's RAFT index well above the new one's
        clustered.nbctl("ls-add", f"old{i}")
    db, replaced = watching(clustered)
    try:
        names = read(db.api, lambda api: sorted(r.name for r in table_rows(api, "Logical_Switch")))
        assert len(names) == 30
        old = clustered.cid()
        replaced_and_followed(clustered, db, replaced)
        assert clustered.cid() != old
    finally:
        db.stop()


def test_a_replaced_standalone_database_is_told_from_a_restarted_one(standalone: StandaloneNb) -> None:
    """Restarted on its file: reconnected, not replaced. Its file replaced by a new empty one (what
    nodeenv/cluster/db_wipe.py does to the sandbox's NB): the replaced hooks run, the replica empty."""
    standalone.nbctl("init")  # NB_Global, as ovn-northd inserts it
    standalone.nbctl("ls-add", "old")
    db, replaced = watching(standalone)
    try:
        assert read(db.api, lambda api: [r.name for r in table_rows(api, "Logical_Switch")]) == ["old"]
        standalone.stop()
        standalone.start()
        db.api.ls_add("again").execute(check_error=True)  # through the new connection, monitoring again
        assert not replaced.is_set() and db.idl.replaced == 0, "a restart on the same file taken as replaced"
        assert sorted(standalone.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()) == [
            "again",
            "old",
        ]
        replaced_and_followed(standalone, db, replaced)
    finally:
        db.stop()
