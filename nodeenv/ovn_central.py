"""OVN central: the NB and SB databases and ovn-northd, standalone or as RAFT clusters.

`standalone` (the default, fastest to start): one ovsdb-server per database on a unix socket and
one ovn-northd. `raft`: each database a cluster of `members` ovsdb-servers, made with
`ovsdb-tool create-cluster` (the first member) and `join-cluster` (the others), RAFT between
them over TLS on loopback ports chosen at start; each member's client listener (its own unix socket)
is on its command line, not set through `set-connection` (a clustered database would give every
member the same listener). Two ovn-northd run against the clusters, active/standby through the SB
lock. Every client is given the whole remote list (`OVN_NB_DB`, `OVN_SB_DB` in node.env) and
writes through the leader.

Off the machine's own namespace (`listen_ip`, a cluster's underlay) the databases are reached over
mutual TLS only: every member listens on `pssl:` with its own certificate from the cluster's OVN
PKI (nodeenv/ovn_pki.py, made here once per cluster), accepts only clients whose certificate that
CA signed, and talks RAFT to its peers over `ssl:` too. There is no `ptcp:` listener.

Bounded databases (docs/database-bounds.md): ovsdb-server compacts a database file by itself (a
RAFT member snapshots its log) once it is twice its last compacted size and at least 10 MB, at most
every 10-20 minutes (and after a day regardless); nothing is set for that. What is set: every
member returns the heap compaction frees (`ovsdb-server/memory-trim-on-compaction on`, off by
default in OVS 3.1). The database files may live on a directory of their own (`db_dir`, e.g. a
filesystem of its own). A member whose disk filled enters RAFT's failure mode ("Status: failed") and
stays there until restarted; `restart_failed` restarts such members on their files, as the
ovn-central pod's liveness probe does.
"""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError, DaemonRecord, free_port, run_checked, start_detaching
from nodeenv.node import Node
from nodeenv.ovn_pki import OvnPki
from ovnaccess.tls import OvnTls

log = logging.getLogger(__name__)

NB_SCHEMA = ovn_tree.share("ovn/ovn-nb.ovsschema")
SB_SCHEMA = ovn_tree.share("ovn/ovn-sb.ovsschema")
MODES = ("standalone", "raft")
PORTS = {"nb": 6641, "sb": 6642}


@dataclass(frozen=True, slots=True)
class Database:
    key: str
    """nb or sb: names its files, daemons and env variable."""
    name: str
    schema: Path


DATABASES = (Database("nb", "OVN_Northbound", NB_SCHEMA), Database("sb", "OVN_Southbound", SB_SCHEMA))


@dataclass(frozen=True, slots=True)
class Member:
    """One ovsdb-server of a database (the only one when standalone)."""

    db: Database
    index: int
    """1.. in a cluster, 0 standalone."""
    dir: Path
    listen_ip: str = ""
    """Also listen for clients at this address (a cluster's underlay), port `port`, over TLS."""
    tls: OvnTls | None = None
    """The member's key, certificate and the CA its clients' and peers' certificates must chain to."""
    db_dir: Path | None = None
    """Where its database file lives, when not in `dir` (a filesystem of its own)."""

    @property
    def label(self) -> str:
        return f"{self.db.key}{self.index or ''}"

    @property
    def daemon(self) -> str:
        return f"ovsdb-server-{self.label}"

    @property
    def socket(self) -> Path:
        return self.dir / f"{self.label}.sock"

    @property
    def dbfile(self) -> Path:
        return (self.db_dir or self.dir) / f"{self.label}.db"

    @property
    def ctl(self) -> Path:
        return self.dir / f"ovsdb-{self.label}.ctl"

    @property
    def port(self) -> int:
        """6641 (NB) / 6642 (SB) for the first member, +1000 for each further one (one address)."""
        return PORTS[self.db.key] + 1000 * max(self.index - 1, 0)

    @property
    def ssl_remote(self) -> str:
        return f"ssl:{self.listen_ip}:{self.port}"

    def argv(self) -> list[str]:
        listen = [f"--remote=pssl:{self.port}:{self.listen_ip}"] if self.listen_ip else []
        return [
            "ovsdb-server",
            str(self.dbfile),
            f"--remote=punix:{self.socket}",
            *listen,
            *(self.tls.ctl_flags() if self.tls else []),
            f"--unixctl={self.ctl}",
            f"--log-file={self.dir / f'ovsdb-{self.label}.log'}",
        ]


class OvnCentral:
    """Starts the central databases and northd for a node environment (see module doc)."""

    def __init__(
        self, mode: str = "standalone", members: int = 3, northds: int = 2, listen_ip: str = "",
        pki: OvnPki | None = None, db_dir: Path | None = None,
    ) -> None:  # fmt: skip
        if mode not in MODES:
            raise DaemonError(f"OVN central mode {mode!r}: expected one of {', '.join(MODES)}")
        if listen_ip and pki is None:
            raise DaemonError("OVN central listens off the host over TLS only: give it the cluster's PKI")
        self.mode = mode
        self.members = members if mode == "raft" else 1
        self.northds = northds if mode == "raft" else 1
        self.listen_ip = listen_ip
        """Where every member also listens for clients over TLS ("" = unix sockets only)."""
        self.pki = pki
        self.db_dir = db_dir
        """Where the database files live ("": beside the sockets and logs, in the run dir)."""

    name = "ovn-central"

    def member_list(self, directory: Path, db: Database) -> list[Member]:
        indexes = [0] if self.mode == "standalone" else range(1, self.members + 1)
        return [self._member(db, i, directory) for i in indexes]

    def pki_of(self, directory: Path) -> OvnPki | None:
        """The PKI the members' TLS comes from: the cluster's, or for RAFT on one host one of the
        central's own (RAFT is over TLS always); None for a standalone unix-socket-only central."""
        if self.pki is None and self.mode == "raft":
            self.pki = OvnPki(directory / "pki")
        return self.pki

    def _member(self, db: Database, index: int, directory: Path) -> Member:
        pki = self.pki_of(directory)
        tls = pki.files(f"ovsdb-server-{db.key}{index or ''}") if pki else None
        return Member(db, index, directory, self.listen_ip, tls, self.db_dir)

    def _issue(self, directory: Path) -> None:
        """Every member's key and certificate, made if absent (the CA first)."""
        pki = self.pki_of(directory)
        if pki is None:
            return
        for m in (m for db in DATABASES for m in self.member_list(directory, db)):
            pki.issue(f"ovsdb-server-{m.label}", [self.listen_ip or "127.0.0.1"])

    def remotes(self, directory: Path, db: Database) -> str:
        return ",".join(f"unix:{m.socket}" for m in self.member_list(directory, db))

    def ssl_remotes(self, directory: Path, db: Database) -> str:
        """The remote list as clients on the underlay reach it ("" without `listen_ip`)."""
        return ",".join(m.ssl_remote for m in self.member_list(directory, db)) if self.listen_ip else ""

    def start(self, node: Node) -> dict[str, str]:
        ovn_tree.activate()  # the tree's ovsdb-server and ovn-northd, or a DaemonError naming `make ovs`
        directory = central_dir(node)
        env = {**node.process_env(), **rundirs(directory)}
        self._issue(directory)
        for db in DATABASES:
            if self.mode == "standalone":
                self._start_standalone(node, self.member_list(directory, db)[0], env)
            else:
                self._start_cluster(node, self.member_list(directory, db), env)
        nb, sb = (self.remotes(directory, db) for db in DATABASES)
        for i in range(1, self.northds + 1):
            label = self._northd_label(i)
            start_detaching(
                label,
                ["ovn-northd", f"--ovnnb-db={nb}", f"--ovnsb-db={sb}",
                 f"--unixctl={directory / f'{label}.ctl'}", f"--log-file={directory / f'{label}.log'}"],
                directory / f"{label}.pid",
                env,
                node.daemons,
                node.settings.netns,
            )  # fmt: skip
        out = {"OVN_NB_DB": nb, "OVN_SB_DB": sb, "OVN_CENTRAL": self.mode}
        if self.listen_ip and self.pki:
            out["OVN_NB_DB_SSL"], out["OVN_SB_DB_SSL"] = (self.ssl_remotes(directory, db) for db in DATABASES)
            out["OVN_PKI_DIR"] = str(self.pki.dir)
        return out

    def _start_standalone(self, node: Node, m: Member, env: dict[str, str]) -> None:
        start_standalone(node, m, env)

    def _start_cluster(
        self, node: Node, members: list[Member], env: dict[str, str], raft: dict[int, str] | None = None
    ) -> None:
        """A new cluster of `members` (their files made: none may exist) on the RAFT addresses
        `raft` (member index -> ssl:host:port; free ports when None), started and connected."""
        raft = raft or {m.index: f"ssl:127.0.0.1:{free_port()}" for m in members}
        first = members[0]
        run_checked(["ovsdb-tool", "create-cluster", str(first.dbfile), str(first.db.schema), raft[1]], env)
        for m in members[1:]:
            run_checked(["ovsdb-tool", "join-cluster", str(m.dbfile), m.db.name, raft[m.index], raft[1]], env)
        for m in members:
            start_detaching(
                m.daemon, m.argv(), m.dir / f"ovsdb-{m.label}.pid", env, node.daemons, node.settings.netns
            )
        for m in members:  # a joining member has the schema once the cluster has taken it in
            run_checked(
                ["ovsdb-client", "--timeout=20", "wait", f"unix:{m.socket}", m.db.name, "connected"], env
            )
            trim_on_compaction(m)

    def cleanup(self, node: Node) -> None:
        """Nothing outside the run dir: the RAFT ports close with their daemons."""

    def member(self, node: Node, key: str, index: int) -> Member:
        db = next(db for db in DATABASES if db.key == key)
        return next(m for m in self.member_list(central_dir(node), db) if m.index == index)

    def restart_member(self, node: Node, key: str, index: int) -> DaemonRecord:
        """Start a stopped member again on its database file (it rejoins its cluster)."""
        m = self.member(node, key, index)
        env = {**node.process_env(), **rundirs(m.dir)}
        rec = start_detaching(
            m.daemon, m.argv(), m.dir / f"ovsdb-{m.label}.pid", env, node.daemons, node.settings.netns
        )
        trim_on_compaction(m)
        return rec

    def compact(self, node: Node) -> dict[str, tuple[int, int]]:
        """`ovsdb-server/compact` on every member (what it does by itself past its thresholds); each
        file's size before and after, by file name."""
        out = {}
        for m in (m for db in DATABASES for m in self.member_list(central_dir(node), db)):
            before = m.dbfile.stat().st_size
            done = subprocess.run(["ovs-appctl", "-t", str(m.ctl), "ovsdb-server/compact", m.db.name],
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            if done.returncode and "duplicate snapshot" not in done.stderr:  # nothing new: kube-ovn #1689
                raise DaemonError(f"{m.daemon}: compaction failed: {done.stderr.strip()}")
            out[m.dbfile.name] = (before, m.dbfile.stat().st_size)
        return out

    def restart_failed(self, node: Node) -> list[str]:
        """Restart every member in RAFT's failure mode (an I/O error, e.g. its disk full) or not
        answering `cluster/status` on its file, as the ovn-central pod's liveness probe has kubelet
        do; the members restarted."""
        restarted = []
        for m in (m for db in DATABASES for m in self.member_list(central_dir(node), db)):
            status = cluster_status(m.ctl, m.db.name).get("Status", "no answer")
            if self.mode == "raft" and status in ("failed", "no answer"):
                log.warning("%s: %s (an I/O error?); restarting it on its file", m.daemon, status)
                node.daemons.stop(m.daemon)
                self.restart_member(node, m.db.key, m.index)
                restarted.append(m.daemon)
        return restarted

    def recreate_cluster(self, node: Node, key: str, raft: dict[int, str]) -> None:
        """A new, empty cluster for database `key` on the given RAFT addresses (the members stopped
        and their files removed first: nodeenv/cluster/db_wipe.py)."""
        db = next(db for db in DATABASES if db.key == key)
        directory = central_dir(node)
        self._start_cluster(
            node, self.member_list(directory, db), {**node.process_env(), **rundirs(directory)}, raft
        )

    def recreate_standalone(self, node: Node, key: str) -> None:
        """A new, empty standalone database `key` in place of its stopped member's file, started on the
        same socket, listener and TLS files (nodeenv/cluster/db_wipe.py)."""
        m = self.member(node, key, 0)
        m.dbfile.unlink(missing_ok=True)
        start_standalone(node, m, {**node.process_env(), **rundirs(m.dir)})

    def leader(self, node: Node, key: str) -> Member | None:
        """The member that says it leads its cluster (None during an election)."""
        for m in self.member_list(central_dir(node), next(db for db in DATABASES if db.key == key)):
            if cluster_status(m.ctl, m.db.name).get("Role") == "leader":
                return m
        return None

    def _northd_label(self, i: int) -> str:
        return "ovn-northd" if self.northds == 1 else f"ovn-northd{i}"

    def northd_ctls(self, node: Node) -> dict[str, Path]:
        """daemon name -> its control socket."""
        labels = [self._northd_label(i) for i in range(1, self.northds + 1)]
        return {label: central_dir(node) / f"{label}.ctl" for label in labels}


def start_standalone(node: Node, m: Member, env: dict[str, str]) -> str:
    """One standalone ovsdb-server for `m` (its database file made first if new); its remote."""
    if not m.dbfile.exists():
        run_checked(["ovsdb-tool", "create", str(m.dbfile), str(m.db.schema)], env)
    start_detaching(
        m.daemon, m.argv(), m.dir / f"ovsdb-{m.label}.pid", env, node.daemons, node.settings.netns
    )
    run_checked(["ovsdb-client", "--timeout=20", "wait", f"unix:{m.socket}", m.db.name, "connected"], env)
    trim_on_compaction(m)
    return f"unix:{m.socket}"


def trim_on_compaction(m: Member, timeout: float = 10.0) -> None:
    """Have the member return to the system the heap a compaction frees (off by default in 3.1);
    waits up to `timeout` for its control socket (a member just started)."""
    argv = ["ovs-appctl", "-t", str(m.ctl), "ovsdb-server/memory-trim-on-compaction", "on"]
    deadline, out = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if out.returncode == 0:
            return
        time.sleep(0.1)
    raise DaemonError(f"{m.daemon}: memory-trim-on-compaction not set: {out.stderr.strip() if out else ''}")


def central_dir(node: Node) -> Path:
    """Where the central's databases, sockets and logs live (beside the node's own OVS)."""
    return node.path("ovs", "x").parent


def rundirs(directory: Path) -> dict[str, str]:
    """OVS/OVN daemons' run, log and db dirs, all in `directory` (never /var/run)."""
    d = str(directory)
    return {k: d for k in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR")}


def cluster_status(ctl: Path, db_name: str) -> dict[str, str]:
    """`cluster/status` of one member as {"Role": "leader", "Status": "cluster member", ...}."""
    out = subprocess.run(
        ["ovs-appctl", "-t", str(ctl), "cluster/status", db_name], capture_output=True, text=True
    )
    if out.returncode != 0:
        return {}
    fields = (line.partition(": ") for line in out.stdout.splitlines())
    return {k.strip(): v.strip() for k, sep, v in fields if sep}


def northd_status(ctl: Path) -> str:
    """ "active", "standby" or "paused" (or "" when it does not answer)."""
    out = subprocess.run(["ovs-appctl", "-t", str(ctl), "status"], capture_output=True, text=True)
    return out.stdout.partition("Status:")[2].strip() if out.returncode == 0 else ""
