"""A full disk under OVN central (issue 29 item 5; kube-ovn #172, #1968): the 3-member NB and SB
RAFT clusters with their database files on a filesystem of their own (a loop device, ext4, 8 MB),
filled. A writer through ovnaccess (as the agent and the controllers write) sees its transaction
fail, logs it and counts it in `ovsdb_client_transaction_errors_total`; every member that could not
write says so through its exporter (`ovn_raft_failed`, `ovn_db_filesystem_free_bytes`). Once space
returns the failed members are restarted on their files (what the pod's liveness probe has kubelet
do) and the same writer, never restarted nor reconnected by hand, commits the write it had failed;
every earlier row reads back; after a compaction of every member `ovsdb-tool check-cluster` passes
on both databases (a follower whose append failed may have written a commit-index record past its
last entry, which check-cluster reports until a compaction rewrites the file)."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from nodeenv.central_exporter_component import CentralExporters
from nodeenv.metrics_scrape import samples, scrape
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_central import DATABASES, OvnCentral, central_dir, cluster_status
from ovnaccess.connection import Ovsdb, connect
from ovnaccess.metrics import OvsdbClientMetrics
from ovnaccess.retry import NotCommitted, RetryPolicy
from tests.conftest import require_ovn
from tests.integration.nodeenv.small_fs import fill, loop_fs

FS_MB = 8
NB = DATABASES[0]


@pytest.fixture(scope="module")
def small_fs(short_tmp: Path) -> Iterator[Path]:
    yield from loop_fs(short_tmp, "dbfs", FS_MB)


@pytest.fixture(scope="module")
def central(small_fs: Path, short_tmp: Path) -> Iterator[tuple[Node, OvnCentral]]:
    require_ovn()
    oc = OvnCentral("raft", db_dir=small_fs)
    node = Node(NodeSettings(run_dir=short_tmp / "dbfull", install_root=short_tmp / "dbfull-root"),
                [oc, CentralExporters(oc)])  # fmt: skip
    node.up()
    try:
        yield node, oc
    finally:
        node.down()


def eventually(check: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def metric(text: str, name: str, **labels: str) -> float | None:
    for got, v in samples(text).get(name, []):
        if all(got.get(k) == want for k, want in labels.items()):
            return v
    return None


def exported(node: Node, name: str) -> list[float | None]:
    """`name`{database=OVN_Northbound} from every member's exporter."""
    urls = node.endpoints["OVN_CENTRAL_METRICS"].split(",")
    return [metric(scrape(u), name, database=NB.name) for u in urls]


def check_cluster(oc: OvnCentral, node: Node) -> None:
    for db in DATABASES:
        files = [str(m.dbfile) for m in oc.member_list(central_dir(node), db)]
        out = subprocess.run(["ovsdb-tool", "check-cluster", *files], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        for f in files:
            assert subprocess.run(["ovsdb-tool", "db-is-clustered", f]).returncode == 0, f


def retried(write: Callable[[], object]) -> bool:
    """True once `write` commits (NotCommitted: not yet)."""
    try:
        write()
    except NotCommitted:
        return False
    return True


def member_statuses(oc: OvnCentral, node: Node) -> set[str | None]:
    return {cluster_status(m.ctl, NB.name).get("Status") for m in oc.member_list(central_dir(node), NB)}


def switches(db: Ovsdb) -> list[str]:
    return sorted(str(r.name) for r in db.api.tables["Logical_Switch"].rows.values())


def test_a_full_disk_fails_writes_clearly_corrupts_nothing_and_recovers(
    central: tuple[Node, OvnCentral], small_fs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node, oc = central
    caplog.set_level(logging.INFO, logger="ovnaccess")
    registry = CollectorRegistry()
    db = connect(node.endpoints["OVN_NB_DB"], NB.name, {"Logical_Switch": None}, timeout=5,
                 retry=RetryPolicy(deadline=5))  # fmt: skip
    OvsdbClientMetrics(registry).watch(db, NB.name)

    def errors() -> float | None:
        return registry.get_sample_value("ovsdb_client_transaction_errors_total", {"database": NB.name})

    filler = None
    try:
        before = [f"full-{i:02d}" for i in range(20)]
        for name in before:
            db.api.ls_add(name, may_exist=True).execute(check_error=True)
        assert min(v or 0 for v in exported(node, "ovn_db_filesystem_free_bytes")) > 1 << 20

        filler = fill(small_fs)
        big = {f"k{i}": "x" * 4000 for i in range(64)}  # 256 KB: more than any block left
        with pytest.raises(Exception) as failed:
            db.api.ls_add("full-after", may_exist=True, external_ids=big).execute(check_error=True)
        print(f"\nwrite on a full disk: {type(failed.value).__name__}: {failed.value}")
        assert errors() == 1.0
        assert any(r.levelno == logging.ERROR and "OVSDB transaction failed" in r.getMessage()
                   for r in caplog.records), "the writer did not log the failed write"  # fmt: skip
        assert 1.0 in eventually(lambda: [v for v in exported(node, "ovn_raft_failed") if v],
                                 "a member to report RAFT failure mode")  # type: ignore[operator]  # fmt: skip
        assert min(v or 0 for v in exported(node, "ovn_db_filesystem_free_bytes")) < 1 << 20

        filler.unlink()
        filler = None
        restarted = oc.restart_failed(node)
        print(f"restarted on their files once space returned: {restarted}")
        assert restarted, "no member was in failure mode"

        # the caller retries, as the controllers' work queues and kubelet do, while a leader is elected
        def write() -> object:
            return db.api.ls_add("full-after", may_exist=True, external_ids=big).execute(check_error=True)

        eventually(lambda: retried(write), "the write, retried, to commit", 90)
        eventually(lambda: "full-after" in switches(db), "the retried write in the writer's replica")
        assert switches(db) == sorted([*before, "full-after"])  # nothing lost, nothing doubled
        assert exported(node, "ovn_raft_failed") == [0.0, 0.0, 0.0]
        eventually(lambda: member_statuses(oc, node) == {"cluster member"}, "every member a member again")
        print(f"compacted: {oc.compact(node)}")
        check_cluster(oc, node)
        assert db.connected()
    finally:
        if filler is not None:
            filler.unlink()
        db.stop()
