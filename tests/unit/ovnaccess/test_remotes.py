from __future__ import annotations

import pytest

from ovnaccess.remotes import InvalidRemote, is_cluster, parse_remotes


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
