"""netpol's apply and an NB replaced by an empty one (issue 29's NB loss, the race CI found): the
IDL thread may follow the new database while an apply waits in its queue. That apply (computed
before, with the very desired state written last) must still write every row, and the apply after
must not take them for written. A standalone NB server of this test's own on a unix socket."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.translate import Acl, AddressSet, Desired, PortGroup
from tests.integration.ovnaccess.test_replaced import StandaloneNb, running

pytestmark = [pytest.mark.root, pytest.mark.ovn]

DESIRED = Desired(
    port_groups={
        "np_r_web": PortGroup(
            "np_r_web",
            "r/web",
            frozenset(),
            frozenset({Acl("to-lport", 1001, "outport == @np_r_web", "allow")}),
        )
    },
    address_sets={"np_r_peers": AddressSet("np_r_peers", "r/web", frozenset({"10.9.0.5"}))},
)


@pytest.fixture
def nb() -> Iterator[StandaloneNb]:
    yield from running(StandaloneNb(Path(tempfile.mkdtemp(prefix="k8sh-npr-", dir="/tmp"))))


def _rows(server: StandaloneNb) -> tuple[list[str], list[str]]:
    return (
        server.nbctl("--bare", "--columns=name", "list", "Port_Group").split(),
        server.nbctl("--bare", "--columns=name", "list", "Address_Set").split(),
    )


def test_an_apply_queued_across_the_replacement_writes_everything(nb: StandaloneNb) -> None:
    nb.nbctl("init")
    policy = PolicyNorthbound(f"unix:{nb.sock}")
    result: list[object] = []
    queued = threading.Thread(target=lambda: result.append(policy.apply(DESIRED)))

    def apply_queued_meanwhile() -> None:
        """On the IDL thread, before netpol's own hook: an apply (a reconcile's, woken by the new
        NB's rows) made and waiting in the connection's queue when the replacement is followed."""
        queued.start()
        deadline = time.monotonic() + 10
        while policy.db.conn.txns.empty() and time.monotonic() < deadline:
            time.sleep(0.005)

    policy.db.on_replaced(apply_queued_meanwhile)
    replaced = threading.Event()
    policy.on_replaced(replaced.set)
    try:
        policy.apply(DESIRED)
        assert _rows(nb) == (["np_r_web"], ["np_r_peers"])
        echo = {("Port_Group", "np_r_web"), ("Address_Set", "np_r_peers")}
        deadline = time.monotonic() + 10
        while not echo <= policy._idl.touched.names and time.monotonic() < deadline:
            time.sleep(0.01)
        echoed = policy.apply(DESIRED)  # the echo of our writes taken, as the controller's next reconcile
        assert echoed.total == 0, echoed
        nb.stop()
        nb.create()
        nb.start()
        assert replaced.wait(30), "the replaced hook did not run"
        queued.join(30)
        assert result, "the queued apply did not return"
        assert _rows(nb) == (["np_r_web"], ["np_r_peers"]), (
            "the queued apply took the new NB's rows for written"
        )
        nb.nbctl("destroy", "Address_Set", "np_r_peers")  # behind our back: the next apply makes it again
        policy.apply(DESIRED)
        assert _rows(nb) == (["np_r_web"], ["np_r_peers"])
    finally:
        policy.close()
        shutil.rmtree(nb.dir, ignore_errors=True)
