"""Transactions retried with backoff while their database is unreachable or electing a leader.

ovsdbapp already re-runs a transaction's commands when python-ovs answers TRY_AGAIN (a
verification conflict, or the connection lost with the commit in flight), waiting for the
replica to change, up to the connection's timeout. Two things are added here:

- each such re-run that follows a reconnection is logged (which server we are on now);
- a transaction that timed out that way (no leader, no server) is queued again after a
  backoff, up to `RetryPolicy.deadline`, each retry logged with its attempt and delay.

Nothing is lost or doubled: a transaction is queued again only once the connection thread has
given it back (ovsdbapp's own `commit` stops waiting at the same timeout its connection thread
keeps trying for, so a retry could run beside the attempt it replaces; ours waits longer, and a
transaction whose outcome is unknown is reported as `NoAnswer`, never re-sent). The commands of
a retried transaction run again on the fresh replica, so a write that did commit before the
connection dropped is seen there: writes are "make it so" commands, as all of the suite's are.
"""

from __future__ import annotations

import logging
import queue
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ovsdbapp import exceptions  # type: ignore[import-untyped]
from ovsdbapp.backend.ovs_idl import idlutils, transaction  # type: ignore[import-untyped]
from ovsdbapp.schema.open_vswitch import impl_idl as ovs_impl  # type: ignore[import-untyped]

log = logging.getLogger(__name__)

TRANSIENT_MARKERS = ("OVS transaction timed out", "cluster error", "not leader")
"""Texts of errors that say "not now" rather than "never" (ovsdbapp's own timeout; a clustered
server that lost its leader while committing)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    deadline: float = 30.0
    """How long one transaction is retried before its last error is raised."""
    first_delay: float = 0.1
    max_delay: float = 2.0

    def delays(self) -> Iterator[float]:
        delay = self.first_delay
        while True:
            yield delay
            delay = min(delay * 2, self.max_delay)


class NotCommitted(RuntimeError):
    """A transaction kept failing for a "not now" reason (no server, no leader) until its retry
    deadline: it was not committed and is not pending."""


class NoAnswer(RuntimeError):
    """The connection thread did not give a transaction back in time: it may still commit, so it
    is not sent again."""


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, exceptions.TimeoutException):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in TRANSIENT_MARKERS)


def describe(exc: BaseException) -> str:
    """str(exc), which ovsdbapp's argument-less TimeoutException cannot give (AttributeError)."""
    try:
        return str(exc) or type(exc).__name__
    except AttributeError:
        return type(exc).__name__


def remote_of(idl: Any) -> str:
    """The server the IDL's session is connected (or connecting) to."""
    try:
        return str(idl._session.get_name())
    except AttributeError:
        return ""


class RetryingCommit:
    """Mixed into an ovsdbapp Transaction: `commit` as the module doc says."""

    api: Any
    ovsdb_connection: Any
    timeout: float
    check_error: bool
    log_errors: bool
    results: queue.Queue[Any]
    commands: list[Any]
    _session_seqno: int | None = None

    @property
    def _label(self) -> str:
        return ",".join(type(c).__name__ for c in self.commands)

    def commit(self) -> Any:
        """`_commit_retrying`, timed for the API's `txn_observer` (ovnaccess/metrics.py) if any."""
        started, ok = time.monotonic(), False
        try:
            result = self._commit_retrying()
            ok = not isinstance(result, idlutils.ExceptionResult)
            return result
        finally:
            observer = getattr(self.api, "txn_observer", None)
            if observer is not None:
                observer(time.monotonic() - started, ok)

    def _commit_retrying(self) -> Any:
        policy: RetryPolicy = getattr(self.api, "retry_policy", RetryPolicy())
        started, delays, attempt = time.monotonic(), policy.delays(), 1
        while True:
            result = self._commit_once(self.timeout + max(self.timeout, policy.deadline))
            if not isinstance(result, idlutils.ExceptionResult):
                if attempt > 1:
                    log.info("OVSDB transaction committed after %d attempts", attempt, extra=self._ctx())
                return result
            delay, error = next(delays), describe(result.ex)
            if not is_transient(result.ex):
                return self._failed(result, result.ex, attempt)
            if time.monotonic() - started + delay > policy.deadline:
                waited = time.monotonic() - started
                gave_up = NotCommitted(
                    f"OVSDB transaction {self._label} not committed after {attempt} attempt(s) "
                    f"in {waited:.1f}s: {error} (no leader took it: its members down, electing, or failed "
                    "writing their files -- a full disk shows as ovn_raft_failed=1 on their exporters)"
                )
                gave_up.__cause__ = result.ex
                return self._failed(result, gave_up, attempt)
            log.warning(
                "OVSDB transaction failed (%s); retrying in %.2fs",
                error,
                delay,
                extra=self._ctx(attempt, delay_s=delay),
            )
            time.sleep(delay)
            attempt += 1

    def _failed(self, result: Any, exc: BaseException, attempt: int) -> Any:
        if self.log_errors:
            log.error("OVSDB transaction failed: %s", describe(exc), extra=self._ctx(attempt))
        if self.check_error:
            raise exc
        return result

    def _commit_once(self, answer_within: float) -> Any:
        try:
            self.ovsdb_connection.queue_txn(self)  # full queue: it was never queued
        except exceptions.TimeoutException as e:
            return idlutils.ExceptionResult(ex=e, tb=traceback.format_exc())
        # The thread gives up about `timeout` after it starts on it, but it may first wait behind
        # another transaction, and ovsdbapp waits for a reconnection without limit once the
        # timeout has passed mid-attempt: wait for as long as the whole retry may take.
        try:
            return self.results.get(timeout=answer_within)
        except queue.Empty:
            raise NoAnswer(
                f"OVSDB transaction {self._label} got no answer within {answer_within:.0f}s; "
                "its outcome is unknown"
            ) from None

    def note_attempt(self) -> None:
        """Called on the connection thread before each run of the commands."""
        try:
            seqno = self.api.idl._session.get_seqno()
        except AttributeError:
            return
        if self._session_seqno is not None and seqno != self._session_seqno:
            log.warning("OVSDB connection changed while committing; running the transaction again",
                        extra=self._ctx())  # fmt: skip
        self._session_seqno = seqno

    def _ctx(self, attempt: int = 0, **more: object) -> dict[str, object]:
        out: dict[str, object] = {"ovsdb_txn": self._label, "remote": remote_of(self.api.idl)}
        if attempt:
            out["attempt"] = attempt
        return {**out, **more}


class RetryingTransaction(RetryingCommit, transaction.Transaction):  # type: ignore[misc]
    def pre_commit(self, txn: Any) -> None:
        self.note_attempt()
        super().pre_commit(txn)


class NoWaitOvsTransaction(RetryingCommit, ovs_impl.OvsVsctlTransaction):  # type: ignore[misc]
    """ovs-vsctl --no-wait: ovsdbapp's default OVS transaction bumps next_cfg and then blocks the
    connection thread until ovs-vswitchd has reconfigured (~10 ms, serialising every request).
    Callers wait for what they need instead (ovn-installed implies vswitchd has the port)."""

    def pre_commit(self, txn: Any) -> None:
        self.note_attempt()
        txn.expected_ifaces = set()  # add_port records into it

    def post_commit(self, txn: Any) -> None:
        transaction.Transaction.post_commit(self, txn)
