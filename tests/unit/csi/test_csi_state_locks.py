"""Atomic state file and per-key operation locks."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from csi.errors import OperationPending
from csi.locks import KeyedLocks
from csi.state import StateFile


def test_state_survives_reopen_and_is_valid_json(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    st = StateFile(path, ("volumes", "snapshots"))
    st.update(lambda d: d["volumes"].update(v1={"id": "v1", "size_bytes": 5}))
    again = StateFile(path, ("volumes", "snapshots"))
    assert again.read(lambda d: d["volumes"]["v1"]["size_bytes"]) == 5
    assert json.loads(path.read_text())["snapshots"] == {}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temp files left


def test_failed_update_changes_nothing(tmp_path: Path) -> None:
    st = StateFile(tmp_path / "s.json", ("volumes",))
    st.update(lambda d: d["volumes"].update(a={"n": 1}))

    def boom(d: dict) -> None:
        d["volumes"]["b"] = {"n": 2}
        raise RuntimeError("half-way")

    with pytest.raises(RuntimeError):
        st.update(boom)
    assert st.read(lambda d: sorted(d["volumes"])) == ["a"]
    assert sorted(json.loads((tmp_path / "s.json").read_text())["volumes"]) == ["a"]


def test_second_holder_of_a_key_is_aborted() -> None:
    locks = KeyedLocks()
    with locks.hold("vol-1"):
        with pytest.raises(OperationPending), locks.hold("vol-1", "other"):
            pass
        with locks.hold("vol-2"):
            pass
    with locks.hold("vol-1", "other"):  # released again, including after the failed attempt
        pass


def test_locks_are_thread_safe() -> None:
    locks, wins, barrier = KeyedLocks(), [], threading.Barrier(8)

    def take() -> None:
        barrier.wait()
        try:
            with locks.hold("k"):
                wins.append(1)
                threading.Event().wait(0.05)
        except OperationPending:
            pass

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= len(wins) < 8


class CountingStateFile(StateFile):
    def __init__(self, path: Path, fail: bool = False) -> None:
        super().__init__(path, ("volumes",))
        self.writes, self.fail = 0, fail

    def _write(self, data: bytes) -> None:
        self.writes += 1
        if self.fail:
            raise OSError("disk full")
        threading.Event().wait(0.01)  # a slow disk, so that writers pile up
        super()._write(data)


def test_concurrent_updates_share_writes_and_all_become_durable(tmp_path: Path) -> None:
    st = CountingStateFile(tmp_path / "s.json")
    barrier = threading.Barrier(16)

    def add(i: int) -> None:
        barrier.wait()
        st.update(lambda d: d["volumes"].update({f"v{i}": {"i": i}}))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    on_disk = json.loads((tmp_path / "s.json").read_text())["volumes"]
    assert sorted(on_disk) == sorted(f"v{i}" for i in range(16))
    assert st.writes < 16


def test_a_failed_write_is_reported_and_forgotten(tmp_path: Path) -> None:
    st = CountingStateFile(tmp_path / "s.json", fail=True)
    with pytest.raises(OSError):
        st.update(lambda d: d["volumes"].update(v={"x": 1}))
    assert st.read(lambda d: d["volumes"]) == {}
