"""OVSDB remote lists as OVN's tools take them: `tcp:HOST:PORT,ssl:HOST:PORT,unix:PATH`.

A clustered database is named by every member's remote, comma-separated (as `ovn-nbctl --db`
and ovn-controller's `external_ids:ovn-remote` take it). Stdlib only: settings readers check
remotes with it before anything connects.
"""

from __future__ import annotations

SCHEMES = ("tcp", "ssl", "unix")


class InvalidRemote(ValueError):
    """A remote list that no OVSDB client could connect with; the message says which entry and why."""


def parse_remotes(text: str) -> tuple[str, ...]:
    """The remotes of a comma-separated list, each checked; InvalidRemote if any is malformed.

    Like python-ovs, an entry without a colon continues the previous one (an IPv6 address
    written bare would otherwise be split), but such a result is then checked like any other."""
    entries: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if entries and part and ":" not in part:
            entries[-1] += "," + part
        else:
            entries.append(part)
    if not any(entries):
        raise InvalidRemote("empty OVSDB remote list")
    for entry in entries:
        check_remote(entry)
    return tuple(entries)


def check_remote(remote: str) -> None:
    scheme, sep, rest = remote.partition(":")
    if not sep or scheme not in SCHEMES:
        raise InvalidRemote(f"OVSDB remote {remote!r}: expected tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH")
    if scheme == "unix":
        if not rest:
            raise InvalidRemote(f"OVSDB remote {remote!r}: unix: needs a socket path")
        return
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRemote(f"OVSDB remote {remote!r}: {scheme}: needs HOST:PORT with a port 1-65535")
    if not host.strip("[]"):
        raise InvalidRemote(f"OVSDB remote {remote!r}: {scheme}: needs a host before the port")


def is_cluster(text: str) -> bool:
    """True when the list names more than one server."""
    return len(parse_remotes(text)) > 1
