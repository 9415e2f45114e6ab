"""OVSDB remote lists as OVN's tools take them: `tcp:HOST:PORT,ssl:HOST:PORT,unix:PATH`.

A clustered database is named by every member's remote, comma-separated (as `ovn-nbctl --db`
and ovn-controller's `external_ids:ovn-remote` take it). Stdlib only: settings readers check
remotes with it before anything connects.
"""

from __future__ import annotations

import ipaddress
import socket

SCHEMES = ("tcp", "ssl", "unix")


class InvalidRemote(ValueError):
    """A remote list that no OVSDB client could connect with; the message says which entry and why."""


class UnresolvedRemote(RuntimeError):
    """A remote's host name does not resolve (yet): a "not now", like a server that is down."""


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


def resolve_remotes(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The entries with every host name replaced by the addresses it resolves to, in resolver order.

    python-ovs connects to IP addresses only: it resolves names through the `unbound` module,
    which neither Debian's python3-openvswitch nor the image carries, and without it a remote
    such as the manifests' `tcp:prismnet-server:6641` fails with "Could not retrieve schema".
    Resolved once, when the connection is made (a Service's ClusterIP does not change; a name
    with several addresses, as a headless Service of a cluster's members, becomes one remote per
    address). UnresolvedRemote when a name has no address."""
    out: list[str] = []
    for entry in entries:
        scheme, _, rest = entry.partition(":")
        if scheme == "unix":
            out.append(entry)
            continue
        host, _, port = rest.rpartition(":")
        bare = host.strip("[]")
        try:
            ipaddress.ip_address(bare)
        except ValueError:
            pass
        else:
            out.append(entry)
            continue
        try:
            infos = socket.getaddrinfo(bare, int(port), type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            raise UnresolvedRemote(f"OVSDB remote {entry!r}: cannot resolve {bare!r}: {e}") from e
        for addr in dict.fromkeys(str(info[4][0]) for info in infos):
            out.append(f"{scheme}:[{addr}]:{port}" if ":" in addr else f"{scheme}:{addr}:{port}")
    return tuple(out)
