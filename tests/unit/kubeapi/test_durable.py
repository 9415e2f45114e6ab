"""The double's journal and snapshot (nodeenv/kubeapi/durable.py) through the store that writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodeenv.kubeapi.durable import Journal
from nodeenv.kubeapi.errors import Expired
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.selectors import Selector
from nodeenv.kubeapi.store import Store


def _configmaps() -> Kind:
    kind = Registry().lookup("", "v1", "configmaps")
    assert kind is not None
    return kind


CM = _configmaps()


def _cm(name: str, value: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"k": value}}


def _store(directory: Path, every: int = 10_000) -> Store:
    store, journal = Store(), Journal(directory, snapshot_every=every)
    objs, rv = journal.load()
    if rv:
        store.load(objs, rv)
    store.journal = journal
    return store


def _written(store: Store) -> None:
    a = store.put(CM, _cm("a", "1"), None)
    store.put(CM, _cm("a", "2"), a)
    b = store.put(CM, _cm("b", "1"), None)
    store.remove(CM, b)


def _state(store: Store) -> list[tuple[str, dict[str, str], str]]:
    return [(o["metadata"]["name"], o["data"], o["metadata"]["resourceVersion"])
            for o in store.list(CM, None, Selector())]  # fmt: skip


@pytest.mark.parametrize("every", [10_000, 3])
def test_a_store_read_back_has_every_write_and_resumes_the_version(tmp_path: Path, every: int) -> None:
    """Journal only, and with a snapshot taken in between (every 3 writes)."""
    first = _store(tmp_path, every)
    _written(first)
    again = _store(tmp_path, every)
    assert _state(again) == _state(first) == [("a", {"k": "2"}, "2")]
    assert again.rv == first.rv == 4
    assert (tmp_path / "snapshot.json").exists() == (every == 3)
    assert again.put(CM, _cm("c", "1"), None)["metadata"]["resourceVersion"] == "5"
    with pytest.raises(Expired):  # the history is not kept: a watch from before gets 410 Gone
        again.watch(CM, None, Selector(), since=3)
    again.watch(CM, None, Selector(), since=4)


def test_a_torn_last_line_is_dropped_and_a_torn_middle_refused(tmp_path: Path) -> None:
    _written(_store(tmp_path))
    journal = tmp_path / "journal.jsonl"
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"rv":5,"key":"/configm')  # the power went during an append
    again = _store(tmp_path)
    assert _state(again) == [("a", {"k": "2"}, "2")]
    again.put(CM, _cm("c", "1"), None)  # appended after the torn line was cut off
    assert [name for name, _, _ in _state(_store(tmp_path))] == ["a", "c"]
    whole = journal.read_bytes()
    lines = whole.splitlines()
    journal.write_bytes(b"\n".join([lines[0], lines[1][:10], *lines[2:]]) + b"\n")
    with pytest.raises(ValueError, match="line 2"):
        Journal(tmp_path).load()


def test_files_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _written(_store(data, every=3))
    assert data.stat().st_mode & 0o777 == 0o700
    assert {p.name: p.stat().st_mode & 0o777 for p in data.iterdir()} == {
        "snapshot.json": 0o600,
        "journal.jsonl": 0o600,
    }
    assert json.loads((data / "snapshot.json").read_text())["rv"] == 3
