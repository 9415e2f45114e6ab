"""ovn-central-exporter against a real 3-member RAFT central (NB and SB) with two ovn-northd, one
exporter process per member as the ovn-central pods run it, scraped over HTTP: one leader per
database, the same term everywhere, the commit index moving with a write, one active northd; a
killed leader shows as down on its member's exporter and a new leader with a higher term."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.daemons import free_port
from nodeenv.metrics_scrape import promtool_problems, samples, scrape
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_central import OvnCentral
from tests.conftest import require_ovn

Exporters = dict[int, str]


@pytest.fixture(scope="module")
def central(short_tmp: Path) -> Iterator[tuple[Node, OvnCentral, Exporters]]:
    require_ovn()
    oc = OvnCentral("raft")
    node = Node(NodeSettings(run_dir=short_tmp / "craft", install_root=short_tmp / "craft-root"), [oc])
    node.up()
    procs, urls = [], {}
    try:
        northds = list(oc.northd_ctls(node).values())
        for i in (1, 2, 3):
            port = free_port()
            member = {key: str(oc.member(node, key, i).ctl) for key in ("nb", "sb")}
            northd = str(northds[i - 1]) if i <= len(northds) else ""
            argv = [sys.executable, "-m", "ovnaccess.central_exporter", f"--metrics-address=127.0.0.1:{port}",
                    "--nb-ctl", member["nb"], "--sb-ctl", member["sb"], "--northd", northd]  # fmt: skip
            procs.append(subprocess.Popen(argv))
            urls[i] = f"http://127.0.0.1:{port}/metrics"
        for url in urls.values():
            wait_answering(url)
        yield node, oc, urls
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(10)
        node.down()


def wait_answering(url: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            scrape(url)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def value(url: str, name: str, **labels: str) -> float | None:
    for got, v in samples(scrape(url)).get(name, []):
        if all(got.get(k) == want for k, want in labels.items()):
            return v
    return None


def leaders(urls: Exporters, db: str) -> list[int]:
    return [i for i, u in urls.items() if value(u, "ovn_raft_role", database=db, role="leader") == 1]


def test_one_leader_per_database_same_term_and_one_active_northd(
    central: tuple[Node, OvnCentral, Exporters],
) -> None:
    _, _, urls = central
    for url in urls.values():
        assert promtool_problems(scrape(url)) == ""
        for target in ("nb", "sb"):
            assert value(url, "ovn_central_up", target=target) == 1
    for db in ("OVN_Northbound", "OVN_Southbound"):
        assert len(leaders(urls, db)) == 1
        assert {value(u, "ovn_raft_cluster_servers", database=db) for u in urls.values()} == {3.0}
        assert len({value(u, "ovn_raft_term", database=db) for u in urls.values()}) == 1
    states = [value(urls[i], "ovn_northd_status", state="active") for i in (1, 2)]
    assert states in ([0.0, 1.0], [1.0, 0.0])
    assert value(urls[3], "ovn_central_up", target="northd") is None  # member 3 runs no northd here


def test_a_write_moves_the_commit_index(central: tuple[Node, OvnCentral, Exporters]) -> None:
    node, _, urls = central
    leader = urls[leaders(urls, "OVN_Northbound")[0]]
    before = value(leader, "ovn_raft_commit_index", database="OVN_Northbound")
    nb = node.endpoints["OVN_NB_DB"]
    subprocess.run(["ovn-nbctl", f"--db={nb}", "--timeout=10", "ls-add", "exporter-test"], check=True)
    after = value(leader, "ovn_raft_commit_index", database="OVN_Northbound")
    assert before is not None and after is not None and after > before


def test_a_killed_leader_is_down_and_a_new_one_leads_a_later_term(
    central: tuple[Node, OvnCentral, Exporters],
) -> None:
    node, oc, urls = central
    db = "OVN_Northbound"
    (old,) = leaders(urls, db)
    term = value(urls[old], "ovn_raft_term", database=db)
    rec = next(r for r in node.daemons.load() if r.name == oc.member(node, "nb", old).daemon)
    os.kill(rec.pid, signal.SIGKILL)
    try:
        deadline = time.monotonic() + 20
        while not (new := leaders({i: u for i, u in urls.items() if i != old}, db)):
            assert time.monotonic() < deadline, "no new NB leader within 20 s"
            time.sleep(0.2)
        assert value(urls[old], "ovn_central_up", target="nb") == 0
        assert value(urls[old], "ovn_raft_role", database=db, role="leader") is None  # nothing to say
        new_term = value(urls[new[0]], "ovn_raft_term", database=db)
        assert term is not None and new_term is not None and new_term > term
    finally:
        oc.restart_member(node, "nb", old)
