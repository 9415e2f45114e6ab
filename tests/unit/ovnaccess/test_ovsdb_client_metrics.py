"""ovsdb_client_* figures: each transaction timed and its failure counted; connection state at scrape."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from ovsdbapp.backend.ovs_idl import idlutils  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry

from ovnaccess.metrics import OvsdbClientMetrics
from ovnaccess.retry import RetryingCommit, RetryPolicy


class FakeTxn(RetryingCommit):
    """The retry loop with a scripted connection thread: each attempt takes `took` and answers
    the next of `answers`."""

    def __init__(self, api: Any, answers: list[Any], took: float = 0.02) -> None:
        self.api, self.timeout, self.commands = api, 1.0, []
        self.check_error, self.log_errors = False, False
        self._answers, self._took = iter(answers), took

    def _commit_once(self, answer_within: float) -> Any:
        time.sleep(self._took)
        return next(self._answers)


def failure(text: str) -> Any:
    return idlutils.ExceptionResult(ex=RuntimeError(text), tb="")


def fake_db(connected: bool) -> Any:
    api = SimpleNamespace(retry_policy=RetryPolicy(deadline=1.0, first_delay=0.01), idl=None)
    idl = SimpleNamespace(reconnects=2)
    return SimpleNamespace(api=api, idl=idl, connected=lambda: connected, remote=lambda: "ssl:10.0.0.12:6641")


def test_transactions_are_timed_retries_included_and_failures_counted() -> None:
    reg = CollectorRegistry()
    metrics, db = OvsdbClientMetrics(reg), fake_db(True)
    metrics.watch(db, "OVN_Northbound")
    nb = {"database": "OVN_Northbound"}
    assert FakeTxn(db.api, [failure("cluster error"), "committed"]).commit() == "committed"
    assert reg.get_sample_value("ovsdb_client_transaction_duration_seconds_count", nb) == 1
    took = reg.get_sample_value("ovsdb_client_transaction_duration_seconds_sum", nb)
    assert took is not None and took >= 0.04  # both attempts
    assert reg.get_sample_value("ovsdb_client_transaction_errors_total", nb) == 0
    FakeTxn(db.api, [failure("constraint violation")]).commit()  # not transient: no retry
    assert reg.get_sample_value("ovsdb_client_transaction_duration_seconds_count", nb) == 2
    assert reg.get_sample_value("ovsdb_client_transaction_errors_total", nb) == 1


def test_connection_state_is_read_at_scrape() -> None:
    reg = CollectorRegistry()
    metrics = OvsdbClientMetrics(reg)
    metrics.watch(fake_db(True), "OVN_Northbound")
    metrics.watch(fake_db(False), "Open_vSwitch")
    assert reg.get_sample_value("ovsdb_client_connected", {"database": "OVN_Northbound"}) == 1
    assert reg.get_sample_value("ovsdb_client_connected", {"database": "Open_vSwitch"}) == 0
    on = {"database": "OVN_Northbound", "server": "ssl:10.0.0.12:6641"}
    assert reg.get_sample_value("ovsdb_client_server_info", on) == 1
    assert reg.get_sample_value("ovsdb_client_server_info", {**on, "database": "Open_vSwitch"}) is None
    assert reg.get_sample_value("ovsdb_client_reconnects_total", {"database": "OVN_Northbound"}) == 2
