"""What OVN central's daemons say of themselves over their control sockets (unixctl JSON-RPC, through
python-ovs's client, as ovs-appctl does): a database member's RAFT state (`cluster/status <db>`) and
ovn-northd's active/standby state (`status`).

OVS prints no commit index; it prints the log's bounds and how many entries are not yet committed
(ovsdb/raft.c: `Log: [log_start, log_end]`, `Entries not yet committed: log_end - commit_index - 1`),
from which the commit index follows.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ROLES = ("leader", "follower", "candidate")
NORTHD_STATES = ("active", "standby", "paused")


class UnixctlError(RuntimeError):
    """The daemon did not answer (no socket, refused, no pidfile)."""


class UnixctlRefused(UnixctlError):
    """The daemon answered with an error (a standalone ovsdb-server has no `cluster/status`)."""


@dataclass(frozen=True, slots=True)
class RaftStatus:
    role: str
    term: int
    commit_index: int
    servers: int
    member: bool
    """Status: cluster member (not joining, not left)."""
    failed: bool = False
    """Status: failed -- RAFT's failure mode after an I/O error (e.g. its disk full): the member
    serves nothing until it is restarted."""


def parse_cluster_status(text: str) -> RaftStatus:
    fields: dict[str, str] = {}
    servers, in_servers = 0, False
    for line in text.splitlines():
        if in_servers:
            if line.startswith((" ", "\t")) and line.strip():
                servers += 1
                continue
            in_servers = False
        key, sep, value = line.partition(":")
        if sep and not line.startswith(" "):
            fields[key.strip()] = value.strip()
            in_servers = key.strip() == "Servers"
    log = re.fullmatch(r"\[(\d+), (\d+)\]", fields.get("Log", ""))
    if log is None or "Term" not in fields:
        raise UnixctlError(f"not a cluster/status answer: {text[:200]!r}")
    log_end, not_committed = int(log.group(2)), int(fields.get("Entries not yet committed", "0"))
    return RaftStatus(
        role=fields.get("Role", ""),
        term=int(fields["Term"]),
        commit_index=log_end - 1 - not_committed,
        servers=servers,
        member=fields.get("Status") == "cluster member",
        failed=fields.get("Status") == "failed",
    )


def parse_northd_status(text: str) -> str:
    """ "active", "standby" or "paused" from `Status: <state>`."""
    state = text.partition("Status:")[2].strip().split()
    if not state:
        raise UnixctlError(f"not a northd status answer: {text[:200]!r}")
    return state[0]


def control_socket(target: Path) -> Path:
    """A daemon's control socket: `target` itself, or for a pidfile (`ovn-northd.pid`, as
    `ovs-appctl -t ovn-northd` reads it) `<dir>/<name>.<pid>.ctl`."""
    if target.suffix != ".pid":
        return target
    pid = target.read_text().strip()
    return target.with_name(f"{target.stem}.{pid}.ctl")


def call(target: Path, command: str, *args: str) -> str:
    """One unixctl command; UnixctlError when the daemon is away or answers an error."""
    from ovs.unixctl.client import UnixctlClient  # type: ignore[import-untyped]

    try:
        path = control_socket(target)
    except OSError as e:
        raise UnixctlError(f"{target}: {e}") from e
    error, client = UnixctlClient.create(str(path))
    if error:
        raise UnixctlError(f"{path}: {os.strerror(error)}")
    try:
        error, err_text, result = client.transact(command, list(args))
    finally:
        client.close()
    if error:
        raise UnixctlError(f"{path} {command}: {os.strerror(error)}")
    if err_text:
        raise UnixctlRefused(f"{path} {command}: {err_text.strip()}")
    return str(result)
