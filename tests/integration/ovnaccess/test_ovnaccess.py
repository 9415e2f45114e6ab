"""ovnaccess against a real ovsdb-server: remote lists, one connection per object, and writes that
survive the server going away (retried, logged, committed exactly once) or give up cleanly."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ovnaccess.connection import Ovsdb, OvsdbUnavailable, connect
from ovnaccess.remotes import InvalidRemote
from ovnaccess.retry import NotCommitted, RetryPolicy
from tests.integration.ovnaccess.conftest import OvsdbServer

TABLES = {"Logical_Switch": None, "Logical_Switch_Port": None}


@contextmanager
def connected(remotes: str, **kw: object) -> Iterator[Ovsdb]:
    db = connect(remotes, "OVN_Northbound", TABLES, **kw)  # type: ignore[arg-type]
    try:
        yield db
    finally:
        db.stop()


def switches(server: OvsdbServer) -> list[str]:
    return sorted(server.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split())


def retry_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ovnaccess.retry" and r.levelno == logging.WARNING]


def test_a_list_with_a_dead_member_reaches_the_live_one(nb_server: OvsdbServer) -> None:
    with connected(f"unix:/nonexistent/nb.sock,tcp:127.0.0.1:1,{nb_server.ssl}") as db:
        db.api.ls_add("ls-a").execute(check_error=True)
        assert db.remote() == nb_server.ssl
    assert switches(nb_server) == ["ls-a"]


def test_a_host_name_as_the_manifests_give_it_connects(nb_server: OvsdbServer) -> None:
    """daemonsets/base/config.yaml names the central by host name (tcp:prismnet-server:6641);
    python-ovs alone cannot resolve one (no `unbound`): "Could not retrieve schema"."""
    with connected(nb_server.ssl.replace("127.0.0.1", "localhost")) as db:
        db.api.ls_add("ls-by-name").execute(check_error=True)
    assert "ls-by-name" in switches(nb_server)


def test_a_name_that_does_not_resolve_is_unavailable_naming_it() -> None:
    with pytest.raises(OvsdbUnavailable, match=re.escape("cannot resolve 'no-such-host.invalid'")):
        connect("tcp:no-such-host.invalid:6641", "OVN_Northbound", TABLES, timeout=2)


def test_no_member_answering_is_unavailable() -> None:
    with pytest.raises(OvsdbUnavailable, match="cannot reach OVN_Northbound"):
        connect("unix:/nonexistent/nb.sock,tcp:127.0.0.1:1", "OVN_Northbound", TABLES, timeout=2)


def test_a_malformed_list_is_refused_before_connecting() -> None:
    with pytest.raises(InvalidRemote, match=re.escape("'tcp:127.0.0.1'")):
        connect("unix:/run/x.sock,tcp:127.0.0.1", "OVN_Northbound", TABLES)


def test_two_connections_in_one_process_are_two(nb_server: OvsdbServer) -> None:
    with connected(nb_server.ssl) as a, connected(nb_server.unix) as b:
        assert a.api.ovsdb_connection is a.conn and b.api.ovsdb_connection is b.conn
        assert a.conn is not b.conn
        a.api.ls_add("from-a").execute(check_error=True)
        deadline = time.monotonic() + 5
        while b.api.lookup("Logical_Switch", "from-a", default=None) is None:  # b's own replica
            assert time.monotonic() < deadline, "b never saw a's write"
            time.sleep(0.01)


def test_a_write_during_a_short_outage_commits_once_and_says_so(
    nb_server: OvsdbServer, retry_log: pytest.LogCaptureFixture
) -> None:
    with connected(nb_server.ssl) as db:
        db.api.ls_add("before").execute(check_error=True)
        nb_server.stop()
        threading.Timer(1.0, nb_server.start).start()
        db.api.ls_add("during", may_exist=True).execute(check_error=True)
        assert db.connected()
    assert switches(nb_server) == ["before", "during"]
    said = [r for r in retry_records(retry_log) if "connection changed" in r.getMessage()]
    assert said and said[0].remote == nb_server.ssl  # type: ignore[attr-defined]


def test_an_outage_longer_than_a_timeout_is_retried_with_backoff_losing_nothing(
    nb_server: OvsdbServer, retry_log: pytest.LogCaptureFixture
) -> None:
    policy = RetryPolicy(deadline=20, first_delay=0.1, max_delay=0.5)
    errors: list[BaseException] = []

    def write(db: Ovsdb, name: str) -> None:
        try:
            db.api.ls_add(name, may_exist=True).execute(check_error=True)
        except BaseException as e:
            errors.append(e)

    with connected(nb_server.ssl, timeout=1.0, retry=policy) as db:
        nb_server.stop()
        restart = threading.Timer(3.0, nb_server.start)
        restart.start()
        writers = [threading.Thread(target=write, args=(db, f"w{i}")) for i in range(8)]
        for w in writers:
            w.start()
        for w in writers:
            w.join(30)
        restart.join()
    assert errors == []
    assert switches(nb_server) == [f"w{i}" for i in range(8)]  # each exactly once
    retries = [r for r in retry_records(retry_log) if "retrying in" in r.getMessage()]
    assert retries, "no retry was logged"
    assert {r.attempt for r in retries} >= {1, 2}  # type: ignore[attr-defined]
    assert all(0.1 <= r.delay_s <= 0.5 and r.ovsdb_txn for r in retries)  # type: ignore[attr-defined]


def test_after_its_deadline_a_write_fails_and_leaves_nothing_behind(nb_server: OvsdbServer) -> None:
    with connected(nb_server.ssl, timeout=1.0, retry=RetryPolicy(deadline=2.0, max_delay=0.5)) as db:
        nb_server.stop()
        started = time.monotonic()
        with pytest.raises(NotCommitted, match="not committed after"):
            db.api.ls_add("too-late", may_exist=True).execute(check_error=True, log_errors=False)
        assert time.monotonic() - started < 6
        nb_server.start()
        db.api.ls_add("after", may_exist=True).execute(check_error=True)
    assert switches(nb_server) == ["after"]  # the failed write was not sent again behind our back


def test_a_permanent_error_is_raised_at_once(
    nb_server: OvsdbServer, retry_log: pytest.LogCaptureFixture
) -> None:
    with connected(nb_server.ssl) as db:
        db.api.ls_add("taken").execute(check_error=True)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="exists"):
            db.api.ls_add("taken").execute(check_error=True, log_errors=False)
        assert time.monotonic() - started < 0.5
    assert retry_records(retry_log) == []
