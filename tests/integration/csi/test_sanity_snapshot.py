"""csi-sanity v5 mirror, part 2: ListSnapshots, DeleteSnapshot, CreateSnapshot, ExpandVolume specs.

See test_sanity.py for what this mirror is; names are the Go spec descriptions.
"""

from __future__ import annotations

import uuid

import grpc
import pytest

from protos import csi_pb2
from tests.integration.csi.conftest import status_of
from tests.integration.csi.sanity_resources import (
    EXPAND_SIZE,
    MAX_NAME_LENGTH,
    TEST_VOLUME_SIZE,
    Resources,
    SanityContext,
    make_create_volume_req,
    sanity_capability,
    unique_string,
    unique_string_with_length,
)

pytestmark = pytest.mark.root


def _verify_snapshot_info(snapshot: csi_pb2.Snapshot) -> None:
    assert snapshot.snapshot_id and snapshot.source_volume_id
    assert snapshot.HasField("creation_time") and snapshot.creation_time.seconds > 0


def _list(sc: SanityContext, **kw: object) -> csi_pb2.ListSnapshotsResponse:
    return sc.controller.ListSnapshots(csi_pb2.ListSnapshotsRequest(**kw))  # type: ignore[arg-type]


# ---------------------------------------------------------------- ListSnapshots


def test_listsnapshots_should_return_appropriate_values_no_optional_values_added(sc: SanityContext) -> None:
    for entry in _list(sc).entries:
        _verify_snapshot_info(entry.snapshot)


def _three_snapshots(r: Resources, tag: str) -> csi_pb2.CreateSnapshotResponse:
    r.must_create_snapshot_from_volume_request(
        make_create_volume_req(unique_string(f"listSnapshots-volume-unrelated-{tag}-1")),
        unique_string(f"listSnapshots-snapshot-unrelated-{tag}-1"),
    )
    target, _ = r.must_create_snapshot_from_volume_request(
        make_create_volume_req(unique_string(f"listSnapshots-volume-target-{tag}")),
        unique_string(f"listSnapshots-snapshot-target-{tag}"),
    )
    r.must_create_snapshot_from_volume_request(
        make_create_volume_req(unique_string(f"listSnapshots-volume-unrelated-{tag}-2")),
        unique_string(f"listSnapshots-snapshot-unrelated-{tag}-2"),
    )
    return target


def test_listsnapshots_should_return_snapshots_that_match_the_specified_snapshot_id(
    sc: SanityContext, r: Resources
) -> None:
    target = _three_snapshots(r, "s")
    res = _list(sc, snapshot_id=target.snapshot.snapshot_id)
    assert len(res.entries) == 1
    _verify_snapshot_info(res.entries[0].snapshot)
    assert res.entries[0].snapshot.snapshot_id == target.snapshot.snapshot_id


def test_listsnapshots_should_return_empty_when_the_specified_snapshot_id_does_not_exist(
    sc: SanityContext,
) -> None:
    assert list(_list(sc, snapshot_id="none-exist-id").entries) == []


def test_listsnapshots_should_return_snapshots_that_match_the_specified_source_volume_id(
    sc: SanityContext, r: Resources
) -> None:
    target = _three_snapshots(r, "v")
    res = _list(sc, source_volume_id=target.snapshot.source_volume_id)
    assert len(res.entries) == 1
    _verify_snapshot_info(res.entries[0].snapshot)
    assert res.entries[0].snapshot.source_volume_id == target.snapshot.source_volume_id


def test_listsnapshots_should_return_empty_when_the_specified_source_volume_id_does_not_exist(
    sc: SanityContext,
) -> None:
    assert list(_list(sc, source_volume_id=f"fake-vol-{uuid.uuid4()}").entries) == []


def test_listsnapshots_check_the_presence_of_new_snapshots_in_the_snapshot_list(
    sc: SanityContext, r: Resources
) -> None:
    total = len(_list(sc).entries)
    snap, _ = r.must_create_snapshot_from_volume_request(
        make_create_volume_req(unique_string("listSnapshots-volume-3")),
        unique_string("listSnapshots-snapshot-3"),
    )
    _verify_snapshot_info(snap.snapshot)
    assert len(_list(sc).entries) == total + 1
    sc.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot.snapshot_id))
    assert len(_list(sc).entries) == total


def test_listsnapshots_should_return_next_token_when_a_limited_number_of_entries_are_requested(
    sc: SanityContext, r: Resources
) -> None:
    min_count, max_entries = 5, 2
    total = len(_list(sc).entries)
    for i in range(1, max(0, min_count - total) + 1):
        snap, _ = r.must_create_snapshot_from_volume_request(
            make_create_volume_req(unique_string(f"volume{i}")), unique_string(f"snapshot{i}")
        )
        _verify_snapshot_info(snap.snapshot)
    total = max(total, min_count)
    first = _list(sc, max_entries=max_entries)
    assert len(first.entries) == max_entries
    rest = _list(sc, starting_token=first.next_token)
    assert len(rest.entries) == total - max_entries


# ---------------------------------------------------------------- DeleteSnapshot


def test_deletesnapshot_should_fail_when_no_snapshot_id_is_provided(sc: SanityContext) -> None:
    code = status_of(lambda: sc.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest()))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_deletesnapshot_should_succeed_when_an_invalid_snapshot_id_is_used(sc: SanityContext) -> None:
    sc.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id="reallyfakesnapshotid"))


def test_deletesnapshot_should_return_appropriate_values_no_optional_values_added(r: Resources) -> None:
    vol = r.create_volume(make_create_volume_req(unique_string("DeleteSnapshot-volume-1")))
    r.must_create_snapshot(
        csi_pb2.CreateSnapshotRequest(
            name=unique_string("DeleteSnapshot-snapshot-1"), source_volume_id=vol.volume.volume_id
        )
    )


# ---------------------------------------------------------------- CreateSnapshot


def test_createsnapshot_should_fail_when_no_name_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.CreateSnapshotRequest(source_volume_id="testId")
    assert status_of(lambda: sc.controller.CreateSnapshot(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_createsnapshot_should_fail_when_no_source_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.CreateSnapshotRequest(name="name")
    assert status_of(lambda: sc.controller.CreateSnapshot(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_createsnapshot_should_succeed_when_requesting_to_create_a_snapshot_with_already_existing_name_and_same_source_volume_id(  # noqa: E501
    r: Resources,
) -> None:
    vol = r.must_create_volume(make_create_volume_req(unique_string("CreateSnapshot-volume-1")))
    req = csi_pb2.CreateSnapshotRequest(
        name=unique_string("CreateSnapshot-snapshot-1"), source_volume_id=vol.volume.volume_id
    )
    first, second = r.must_create_snapshot(req), r.must_create_snapshot(req)
    assert first.snapshot.snapshot_id == second.snapshot.snapshot_id


def test_createsnapshot_should_fail_when_requesting_to_create_a_snapshot_with_already_existing_name_and_different_source_volume_id(  # noqa: E501
    sc: SanityContext, r: Resources
) -> None:
    name = unique_string("CreateSnapshot-snapshot-2")
    r.must_create_snapshot_from_volume_request(
        make_create_volume_req(unique_string("CreateSnapshot-volume-2")), name
    )
    volume2 = r.must_create_volume(make_create_volume_req(unique_string("CreateSnapshot-volume-3")))
    req = csi_pb2.CreateSnapshotRequest(name=name, source_volume_id=volume2.volume.volume_id)
    assert status_of(lambda: sc.controller.CreateSnapshot(req)) == grpc.StatusCode.ALREADY_EXISTS


def test_createsnapshot_should_succeed_when_creating_snapshot_with_maximum_length_name(r: Resources) -> None:
    vol = r.must_create_volume(make_create_volume_req(unique_string("CreateSnapshot-volume-maxlen-name")))
    name = unique_string_with_length("CreateSnapshot-snapshot-maxlen", MAX_NAME_LENGTH)
    req = csi_pb2.CreateSnapshotRequest(name=name, source_volume_id=vol.volume.volume_id)
    r.must_create_snapshot(req)
    r.must_create_snapshot(req)


# ---------------------------------------------------------------- ExpandVolume


def test_expandvolume_should_fail_if_no_volume_id_is_given(sc: SanityContext) -> None:
    req = csi_pb2.ControllerExpandVolumeRequest(
        capacity_range=csi_pb2.CapacityRange(required_bytes=EXPAND_SIZE)
    )
    assert status_of(lambda: sc.controller.ControllerExpandVolume(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_expandvolume_should_fail_if_no_capacity_range_is_given(sc: SanityContext) -> None:
    req = csi_pb2.ControllerExpandVolumeRequest()
    assert status_of(lambda: sc.controller.ControllerExpandVolume(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_expandvolume_should_work(sc: SanityContext, r: Resources) -> None:
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string("sanity-expand-volume"),
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
        )
    )
    rsp = sc.controller.ControllerExpandVolume(
        csi_pb2.ControllerExpandVolumeRequest(
            volume_id=vol.volume.volume_id,
            capacity_range=csi_pb2.CapacityRange(required_bytes=EXPAND_SIZE),
            volume_capability=sanity_capability(),
        )
    )
    assert rsp.capacity_bytes == EXPAND_SIZE


def test_listsnapshots_pagination_should_detect_snapshots_added_between_pages_and_accept_tokens_when_the_last_snapshot_from_a_page_is_deleted(  # noqa: E501
    sc: SanityContext, r: Resources
) -> None:
    """Not a csi-sanity spec: its ListVolumes XIt, done for snapshots (the task's cursor requirement)."""
    existing = {e.snapshot.snapshot_id: True for e in _list(sc).entries}
    min_count, max_entries = max(3, len(existing)), 2
    for i in range(len(existing), min_count):
        snap, _ = r.must_create_snapshot_from_volume_request(
            make_create_volume_req(unique_string(f"page-vol-{i}")), unique_string(f"page-snap-{i}")
        )
        existing[snap.snapshot.snapshot_id] = True
    page = _list(sc, max_entries=max_entries)
    assert len(page.entries) == max_entries and page.next_token
    for entry in page.entries:
        assert existing[entry.snapshot.snapshot_id]
        sc.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=entry.snapshot.snapshot_id))
        existing[entry.snapshot.snapshot_id] = False
    snap, _ = r.must_create_snapshot_from_volume_request(
        make_create_volume_req(unique_string("page-vol-new")), unique_string("page-snap-new")
    )
    existing[snap.snapshot.snapshot_id] = True
    rest = _list(sc, starting_token=page.next_token)
    assert len(rest.entries) <= min_count - max_entries + 1
    for entry in rest.entries:  # no deleted entry, no duplicate
        assert existing[entry.snapshot.snapshot_id]
        existing[entry.snapshot.snapshot_id] = False
    unseen_before_cursor = [k for k, v in existing.items() if v]
    assert all(k < page.entries[-1].snapshot.snapshot_id for k in unseen_before_cursor)
