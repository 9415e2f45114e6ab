"""prismnet_ovn_controller_up: 1 while a daemon answers OVS's unixctl `version` on an
`ovn-controller.<pid>.ctl` in the run dir, 0 for a socket nobody listens on (a killed process leaves
its file), for a listener that never answers (a wedged process), and for no socket at all."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cni.ovn_controller_probe import OvnControllerProbe


def _value(rundir: Path) -> str:
    r = CollectorRegistry()
    r.register(OvnControllerProbe(rundir, timeout=0.3))
    line = [
        x for x in generate_latest(r).decode().splitlines() if x.startswith("prismnet_ovn_controller_up ")
    ]
    return line[0].split()[1]


def _listen(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(4)
    return s


@pytest.fixture
def rundir() -> Iterator[Path]:
    # unix socket paths are short: not under pytest's tmp_path
    d = Path(f"/tmp/pnprobe{os.getpid()}")
    d.mkdir()
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


def _answer(server: socket.socket, reply: dict[str, object]) -> None:
    conn, _ = server.accept()
    with conn:
        request = json.loads(conn.recv(4096))
        assert request["method"] == "version"
        conn.sendall(json.dumps({**reply, "id": request["id"]}).encode())


def test_an_answering_controller_is_up(rundir: Path) -> None:
    server = _listen(rundir / "ovn-controller.4242.ctl")
    t = threading.Thread(target=_answer, args=(server, {"result": "ovn-controller 23.03", "error": None}))
    t.start()
    assert _value(rundir) == "1.0"
    t.join()
    server.close()


def test_a_left_socket_a_silent_listener_an_error_and_nothing_are_down(rundir: Path) -> None:
    assert _value(rundir) == "0.0"  # no socket
    _listen(rundir / "ovn-controller.1.ctl").close()  # the file stays, nobody listens
    assert _value(rundir) == "0.0"
    silent = _listen(rundir / "ovn-controller.2.ctl")  # accepts (backlog), never answers
    assert _value(rundir) == "0.0"
    silent.close()
    (rundir / "ovn-controller.2.ctl").unlink()
    erring = _listen(rundir / "ovn-controller.3.ctl")
    t = threading.Thread(target=_answer, args=(erring, {"result": None, "error": "unknown command"}))
    t.start()
    assert _value(rundir) == "0.0"
    t.join()
    erring.close()
