"""Parsing what OVN central's daemons answer on their control sockets (texts as OVS 3.1 prints them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.metrics_scrape import promtool_problems, samples
from ovnaccess.central_exporter import ExporterSettings, Snapshot, file_sizes, render
from ovnaccess.central_status import (
    RaftStatus,
    UnixctlError,
    control_socket,
    parse_cluster_status,
    parse_northd_status,
)

FOLLOWER = """\
c2a0
Name: OVN_Northbound
Cluster ID: 4f1e (4f1e1b4e-0000-4000-8000-000000000000)
Server ID: c2a0 (c2a0c2a0-0000-4000-8000-000000000000)
Address: ssl:127.0.0.1:40001
Status: cluster member
Role: follower
Term: 4
Leader: 91b2
Vote: 91b2

Election timer: 1000
Log: [2, 57]
Entries not yet committed: 1
Entries not yet applied: 1
Connections: ->91b2 ->77d1 <-91b2 <-77d1
Disconnections: 1
Servers:
    c2a0 (c2a0 at ssl:127.0.0.1:40001) (self)
    91b2 (91b2 at ssl:127.0.0.1:40002)
    77d1 (77d1 at ssl:127.0.0.1:40003)
"""


def test_cluster_status_of_a_follower() -> None:
    # log_end 57 exclusive, one entry not committed: committed up to 55
    assert parse_cluster_status(FOLLOWER) == RaftStatus("follower", 4, 55, 3, True)


def test_a_standalone_database_is_no_cluster_status() -> None:
    with pytest.raises(UnixctlError):
        parse_cluster_status("OVN_Northbound: not a clustered database")


def test_northd_states() -> None:
    assert parse_northd_status("Status: active\n") == "active"
    assert parse_northd_status("Status: standby\n") == "standby"
    with pytest.raises(UnixctlError):
        parse_northd_status("")


def test_a_pidfile_names_the_control_socket(tmp_path: Path) -> None:
    (tmp_path / "ovn-northd.pid").write_text("4242\n")
    assert control_socket(tmp_path / "ovn-northd.pid") == tmp_path / "ovn-northd.4242.ctl"
    assert control_socket(tmp_path / "ovnnb_db.ctl") == tmp_path / "ovnnb_db.ctl"


def test_rendered_families_are_clean_for_promtool() -> None:
    snap = Snapshot(
        {"nb": True, "sb": False, "northd": True}, {"nb": parse_cluster_status(FOLLOWER)}, "standby"
    )
    text = render(snap).decode()
    assert promtool_problems(text) == ""
    got = samples(text)
    assert ({"database": "OVN_Northbound", "role": "follower"}, 1.0) in got["ovn_raft_role"]
    assert ({"database": "OVN_Northbound", "role": "leader"}, 0.0) in got["ovn_raft_role"]
    assert ({"target": "sb"}, 0.0) in got["ovn_central_up"]
    assert ({"database": "OVN_Northbound"}, 55.0) in got["ovn_raft_commit_index"]
    assert ({"state": "standby"}, 1.0) in got["ovn_northd_status"]


def test_flags_fall_back_to_the_environment() -> None:
    s = ExporterSettings.parse(["--northd", ""], {"OVN_CENTRAL_EXPORTER_METRICS_ADDRESS": "10.0.0.11:9476"})
    assert s.metrics_address == "10.0.0.11:9476" and s.northd is None
    assert s.nb_ctl == Path("/var/run/ovn/ovnnb_db.ctl")


def test_a_member_in_raft_failure_mode_is_exported_as_failed(tmp_path: Path) -> None:
    """After an I/O error (a full disk) cluster/status says `Status: failed` (seen with OVS 3.1 on
    a filled loop filesystem: tests/integration/nodeenv/test_db_full_disk.py)."""
    failed = parse_cluster_status(FOLLOWER.replace("Status: cluster member", "Status: failed"))
    assert failed.failed and not failed.member
    assert not parse_cluster_status(FOLLOWER).failed
    db = tmp_path / "nb1.db"
    db.write_bytes(b"x" * 1234)
    files = file_sizes({"nb": db, "sb": tmp_path / "absent.db"})
    assert list(files) == ["nb"] and files["nb"][0] == 1234 and files["nb"][1] > 0
    got = samples(render(Snapshot({"nb": True}, {"nb": failed}, None, files)).decode())
    assert got["ovn_raft_failed"] == [({"database": "OVN_Northbound"}, 1.0)]
    assert got["ovn_db_file_bytes"] == [({"database": "OVN_Northbound"}, 1234.0)]
    assert got["ovn_db_filesystem_free_bytes"][0][1] == float(files["nb"][1])


def test_database_files_default_to_the_statefulsets_paths() -> None:
    s = ExporterSettings.parse([], {"OVN_CENTRAL_EXPORTER_SB_DB": ""})
    assert s.db_files == {"nb": Path("/var/lib/ovn/ovnnb_db.db")}
