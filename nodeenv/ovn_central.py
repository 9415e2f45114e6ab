"""OVN central: the NB and SB databases and ovn-northd, standalone or as RAFT clusters.

`standalone` (the default, fastest to start): one ovsdb-server per database on a unix socket and
one ovn-northd. `raft`: each database a cluster of `members` ovsdb-servers, made with
`ovsdb-tool create-cluster` (the first member) and `join-cluster` (the others), RAFT between
them on loopback TCP ports chosen at start; each member's client listener (its own unix socket)
is on its command line, not set through `set-connection` (a clustered database would give every
member the same listener). Two ovn-northd run against the clusters, active/standby through the SB
lock. Every client is given the whole remote list (`OVN_NB_DB`, `OVN_SB_DB` in node.env) and
writes through the leader.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nodeenv.daemons import DaemonError, DaemonRecord, free_port, run_checked, start_detaching
from nodeenv.node import Node

log = logging.getLogger(__name__)

NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")
MODES = ("standalone", "raft")
TCP_PORTS = {"nb": 6641, "sb": 6642}


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
    tcp_ip: str = ""
    """Also listen for clients on TCP at this address (a cluster's underlay), port `tcp_port`."""

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
        return self.dir / f"{self.label}.db"

    @property
    def ctl(self) -> Path:
        return self.dir / f"ovsdb-{self.label}.ctl"

    @property
    def tcp_port(self) -> int:
        """6641 (NB) / 6642 (SB) for the first member, +1000 for each further one (one address)."""
        return TCP_PORTS[self.db.key] + 1000 * max(self.index - 1, 0)

    @property
    def tcp_remote(self) -> str:
        return f"tcp:{self.tcp_ip}:{self.tcp_port}"

    def argv(self) -> list[str]:
        tcp = [f"--remote=ptcp:{self.tcp_port}:{self.tcp_ip}"] if self.tcp_ip else []
        return [
            "ovsdb-server",
            str(self.dbfile),
            f"--remote=punix:{self.socket}",
            *tcp,
            f"--unixctl={self.ctl}",
            f"--log-file={self.dir / f'ovsdb-{self.label}.log'}",
        ]


class OvnCentral:
    """Starts the central databases and northd for a node environment (see module doc)."""

    def __init__(
        self, mode: str = "standalone", members: int = 3, northds: int = 2, tcp_ip: str = ""
    ) -> None:
        if mode not in MODES:
            raise DaemonError(f"OVN central mode {mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.members = members if mode == "raft" else 1
        self.northds = northds if mode == "raft" else 1
        self.tcp_ip = tcp_ip
        """Where every member also listens for clients on TCP ("" = unix sockets only)."""

    name = "ovn-central"

    def member_list(self, directory: Path, db: Database) -> list[Member]:
        if self.mode == "standalone":
            return [Member(db, 0, directory, self.tcp_ip)]
        return [Member(db, i, directory, self.tcp_ip) for i in range(1, self.members + 1)]

    def remotes(self, directory: Path, db: Database) -> str:
        return ",".join(f"unix:{m.socket}" for m in self.member_list(directory, db))

    def tcp_remotes(self, directory: Path, db: Database) -> str:
        """The remote list as clients on the underlay reach it ("" without `tcp_ip`)."""
        return ",".join(m.tcp_remote for m in self.member_list(directory, db)) if self.tcp_ip else ""

    def start(self, node: Node) -> dict[str, str]:
        directory = central_dir(node)
        env = {**node.process_env(), **rundirs(directory)}
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
        if self.tcp_ip:
            out["OVN_NB_DB_TCP"], out["OVN_SB_DB_TCP"] = (self.tcp_remotes(directory, db) for db in DATABASES)
        return out

    def _start_standalone(self, node: Node, m: Member, env: dict[str, str]) -> None:
        start_standalone(node, m, env)

    def _start_cluster(self, node: Node, members: list[Member], env: dict[str, str]) -> None:
        raft = {m.index: f"tcp:127.0.0.1:{free_port()}" for m in members}
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

    def cleanup(self, node: Node) -> None:
        """Nothing outside the run dir: the RAFT ports close with their daemons."""

    def member(self, node: Node, key: str, index: int) -> Member:
        db = next(db for db in DATABASES if db.key == key)
        return next(m for m in self.member_list(central_dir(node), db) if m.index == index)

    def restart_member(self, node: Node, key: str, index: int) -> DaemonRecord:
        """Start a stopped member again on its database file (it rejoins its cluster)."""
        m = self.member(node, key, index)
        env = {**node.process_env(), **rundirs(m.dir)}
        return start_detaching(
            m.daemon, m.argv(), m.dir / f"ovsdb-{m.label}.pid", env, node.daemons, node.settings.netns
        )

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
    return f"unix:{m.socket}"


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
