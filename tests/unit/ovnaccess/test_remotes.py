from __future__ import annotations

import re

import pytest

from ovnaccess.remotes import InvalidRemote, UnresolvedRemote, is_cluster, parse_remotes, resolve_remotes


def test_a_cluster_list_is_every_member() -> None:
    text = "tcp:10.0.0.1:6641, tcp:10.0.0.2:6641,ssl:[fd00::3]:6641"
    assert parse_remotes(text) == ("tcp:10.0.0.1:6641", "tcp:10.0.0.2:6641", "ssl:[fd00::3]:6641")
    assert is_cluster(text)
    assert not is_cluster("unix:/run/ovn/ovnnb_db.sock")


def test_host_names_are_kept_for_the_tools_that_resolve_them() -> None:
    assert parse_remotes("tcp:prismnet-server:6641") == ("tcp:prismnet-server:6641",)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        (" , ", "empty"),
        ("tcp:10.0.0.1", "HOST:PORT"),
        ("tcp:10.0.0.1:0", "HOST:PORT"),
        ("tcp:10.0.0.1:65536", "HOST:PORT"),
        ("tcp::6641", "needs a host"),
        ("unix:", "socket path"),
        ("http://10.0.0.1:6641", "expected tcp:HOST:PORT"),
        ("/run/ovn/ovnnb_db.sock", "expected tcp:HOST:PORT"),
        ("tcp:10.0.0.1:6641,pssl:6641", "'pssl:6641'"),
    ],
)
def test_a_malformed_entry_is_named(text: str, why: str) -> None:
    with pytest.raises(InvalidRemote, match=why):
        parse_remotes(text)


def test_host_names_resolve_to_addresses_and_the_rest_is_kept() -> None:
    # python-ovs connects to addresses only (names need `unbound`, absent here and in the image)
    got = resolve_remotes(("unix:/run/nb.sock", "tcp:10.0.0.1:6641", "ssl:[::1]:6641", "tcp:localhost:6641"))
    assert got[:3] == ("unix:/run/nb.sock", "tcp:10.0.0.1:6641", "ssl:[::1]:6641")
    assert "tcp:127.0.0.1:6641" in got[3:]
    assert all(r.endswith(":6641") and "localhost" not in r for r in got[3:])


def test_a_name_that_does_not_resolve_is_not_now_naming_it() -> None:
    with pytest.raises(UnresolvedRemote, match=re.escape("no-such-host.invalid")):
        resolve_remotes(("tcp:no-such-host.invalid:6641",))
