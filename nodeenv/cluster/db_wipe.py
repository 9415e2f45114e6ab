"""An OVN central database lost on every member and created again, empty (issue 29 item 4).

Standalone (the sandbox's central): its one ovsdb-server stopped by PID, its file replaced by an
empty database of the schema (`ovsdb-tool create`), started again on the same socket, `pssl:`
listener and TLS files. No client needs telling: a standalone database has no RAFT index to call
stale; ovnaccess tells the new file by its NB_Global row (ovnaccess/connection.py).

RAFT:
`wipe(cluster, "nb")` stops every member of the NB RAFT cluster (SIGTERM, by recorded PID),
deletes their database files, creates a new empty clustered NB on the same RAFT addresses (the
same TLS files: what an operator does with `ovsdb-tool create-cluster` / `join-cluster` after
losing the database) and starts the members again on their usual sockets and `pssl:` listeners.

Then what OVN's own daemons need told (they refuse a database whose RAFT index is below the one
they saw, as stale, until reset): `nb-cluster-state-reset` to every ovn-northd, and for the SB
`sb-cluster-state-reset` to every ovn-northd and every node's ovn-controller. Our own clients
(ovnaccess) notice the new cluster id by themselves and resync (docs/nb-rebuild.md).
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.faults import record
from nodeenv.daemons import DaemonError, run_checked, stop
from nodeenv.ovn_central import DATABASES, Member, central_dir

log = logging.getLogger(__name__)


def raft_addresses(members: list[Member]) -> dict[int, str]:
    """Each member's RAFT address, as its database file records it."""
    return {m.index: run_checked(["ovsdb-tool", "db-local-address", str(m.dbfile)]).strip() for m in members}


def wipe(cluster: Cluster, key: str = "nb") -> float:
    """Replace database `key` (nb or sb) by a new, empty cluster (see module doc); the
    time.monotonic() at which its last member was stopped."""
    comp, central = cluster.central_component, cluster.central
    db = next(d for d in DATABASES if d.key == key)
    members = comp.member_list(central_dir(central), db)
    if comp.mode == "standalone":
        stop(record(central, members[0].daemon))
        at = time.monotonic()
        comp.recreate_standalone(central, key)
        log.info("%s (standalone) wiped and created again, empty", db.name)
        return at
    raft = raft_addresses(members)
    for m in members:
        stop(record(central, m.daemon))
    at = time.monotonic()
    for m in members:
        for f in (m.dbfile, m.dbfile.with_name(f".{m.dbfile.name}.~lock~")):
            f.unlink(missing_ok=True)
    comp.recreate_cluster(central, key, raft)
    log.info("%s wiped and created again, empty, on %s", db.name, ", ".join(raft.values()))
    for ctl in comp.northd_ctls(central).values():
        _reset(ctl, f"{key}-cluster-state-reset")
    if key == "sb":
        for n in cluster.nodes:
            rec = record(n.node, "ovn-controller")
            _reset(n.node.run_dir / "ovs" / f"ovn-controller.{rec.pid}.ctl", "sb-cluster-state-reset")
    return at


def _reset(ctl: Path, command: str) -> None:
    out = subprocess.run(["ovs-appctl", "-t", str(ctl), command], capture_output=True, text=True)
    if out.returncode != 0:
        raise DaemonError(f"{ctl.name} {command}: {out.stderr.strip()}")
