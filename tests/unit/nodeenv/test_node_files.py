from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nodeenv.daemons import DaemonRecord, DaemonTable, is_alive
from nodeenv.node import read_env_file, write_env_file


def test_env_file_round_trips_values_with_shell_metacharacters(tmp_path: Path) -> None:
    values = {"OVN_NB_DB": "unix:/tmp/a b/nb.sock", "WEIRD": "it's $HOME; rm -rf /", "EMPTY": ""}
    path = tmp_path / "node.env"
    write_env_file(path, values)
    assert read_env_file(path) == values
    # And a real shell agrees with our reader.
    out = subprocess.run(
        ["bash", "-c", f'source {path}; printf %s "$WEIRD"'], capture_output=True, text=True, check=True
    ).stdout
    assert out == values["WEIRD"]


def test_stop_all_signals_only_recorded_live_daemons(tmp_path: Path) -> None:
    table = DaemonTable(tmp_path / "daemons.json")
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        table.add(DaemonRecord(name="mine", pid=mine.pid, exe=Path(sys.executable).name))
        # A recycled PID: the record names an executable the process is not running.
        table.add(DaemonRecord(name="recycled", pid=bystander.pid, exe="ovsdb-server"))
        assert is_alive(table.load()[0]) and not is_alive(table.load()[1])
        stopped = table.stop_all(timeout=5)
        assert stopped == ["mine"]
        assert mine.wait(timeout=5) != 0
        assert bystander.poll() is None, "a process we did not start was signalled"
        assert table.load() == []
    finally:
        bystander.kill()
        bystander.wait()
        if mine.poll() is None:
            mine.kill()
