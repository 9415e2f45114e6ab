"""The `prismnet` executable: framing, exit codes, VERSION, agent unreachable, isolated start-up."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cni.daemon.server import parse_shim_request
from cni.shim import launcher_script

REPO = Path(__file__).resolve().parents[3]


class FakeAgent:
    """A unix-socket HTTP server that records the request and answers with a canned reply."""

    def __init__(self, path: Path, status: int, body: bytes) -> None:
        self.path, self.status, self.body = path, status, body
        self.requests: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(
                    next(x for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")).split(
                        b":"
                    )[1]
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append(body)
                conn.sendall(
                    b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n" % (self.status, len(self.body)) + self.body
                )


@pytest.fixture
def exe(tmp_path: Path) -> Path:
    path = tmp_path / "prismnet"
    path.write_text(launcher_script(sys.executable, str(REPO)))
    path.chmod(0o755)
    return path


@pytest.fixture
def agent_sock(short_tmp: Path) -> Iterator[Path]:
    path = short_tmp / f"shim-{id(object())}.sock"
    yield path
    path.unlink(missing_ok=True)


def _run(exe: Path, env: dict[str, str], stdin: bytes) -> tuple[int, bytes]:
    proc = subprocess.run([str(exe)], input=stdin, env=env, capture_output=True)
    return proc.returncode, proc.stdout


def _conf(sock: Path | str, **extra: object) -> bytes:
    """A netconf as a runtime sends it: the conflist's plugin entry, naming the agent's socket."""
    return json.dumps({"cniVersion": "1.0.0", "name": "prismnet", "agentSocket": str(sock), **extra}).encode()


def test_forwards_cni_env_and_stdin_and_prints_reply(exe: Path, agent_sock: Path) -> None:
    fake = FakeAgent(agent_sock, 200, b'{"cniVersion":"1.0.0","ips":[]}')
    env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "OTHER": "x"}
    rc, out = _run(exe, env, _conf(agent_sock))
    assert (rc, out) == (0, b'{"cniVersion":"1.0.0","ips":[]}')
    fwd_env, stdin = parse_shim_request(fake.requests[0])
    assert fwd_env == {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1"}
    assert stdin == _conf(agent_sock)


def test_environment_overrides_the_netconf_socket(exe: Path, agent_sock: Path, tmp_path: Path) -> None:
    fake = FakeAgent(agent_sock, 200, b"{}")
    env = {"CNI_COMMAND": "DEL", "PRISMNET_AGENT_SOCKET": str(agent_sock)}
    rc, _ = _run(exe, env, _conf(tmp_path / "elsewhere.sock"))
    assert rc == 0 and len(fake.requests) == 1


def test_agent_error_reply_exits_1(exe: Path, agent_sock: Path) -> None:
    FakeAgent(agent_sock, 400, b'{"code":7,"msg":"bad"}')
    rc, out = _run(exe, {"CNI_COMMAND": "ADD"}, _conf(agent_sock))
    assert (rc, json.loads(out)["code"]) == (1, 7)


def test_unreachable_agent_is_11_and_names_the_fix(exe: Path, tmp_path: Path) -> None:
    rc, out = _run(exe, {"CNI_COMMAND": "DEL"}, _conf(tmp_path / "no", cniVersion="0.4.0"))
    reply = json.loads(out)
    assert rc == 1 and reply["code"] == 11 and reply["cniVersion"] == "0.4.0"
    assert "start prismnet-agent" in reply["msg"] and str(tmp_path / "no") in reply["msg"]
    assert "agentSocket" in reply["msg"]


def test_without_agent_socket_the_default_path_is_named(exe: Path) -> None:
    rc, out = _run(exe, {"CNI_COMMAND": "ADD"}, b'{"cniVersion":"1.0.0","name":"x","type":"prismnet"}')
    reply = json.loads(out)
    assert rc == 1 and reply["code"] == 11 and "/run/prismnet/cni.sock" in reply["msg"], reply


@pytest.mark.parametrize(
    ("stdin", "code"),
    [
        (b'{"cniVersion":"1.0.0","agentSocket":"run/cni.sock"}', 7),
        (b'{"cniVersion":"1.0.0","agentSocket":42}', 7),
        (b"{not json", 6),
        (b'["a list"]', 6),
        (b"\xff\xfe", 6),
    ],
)
def test_bad_netconf_is_answered_by_the_shim(exe: Path, stdin: bytes, code: int) -> None:
    rc, out = _run(exe, {"CNI_COMMAND": "ADD"}, stdin)
    reply = json.loads(out)
    assert rc == 1 and reply["code"] == code and reply["msg"], reply


def test_status_with_unreachable_agent_is_50(exe: Path, tmp_path: Path) -> None:
    rc, out = _run(exe, {"CNI_COMMAND": "STATUS"}, _conf(tmp_path / "no"))
    assert rc == 1 and json.loads(out)["code"] == 50


def test_version_is_local(exe: Path, tmp_path: Path) -> None:
    rc, out = _run(exe, {"CNI_COMMAND": "VERSION"}, b"")
    assert rc == 0 and json.loads(out) == {
        "cniVersion": "1.1.0",
        "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"],
    }


def test_missing_command_is_4(exe: Path) -> None:
    rc, out = _run(exe, {}, b"{}")
    assert rc == 1 and json.loads(out)["code"] == 4


def test_hot_path_imports_no_json_socket_or_site(exe: Path, agent_sock: Path) -> None:
    """Reading agentSocket costs the C scanner only: `json` (and its `re`) stays unimported."""
    FakeAgent(agent_sock, 200, b"{}")
    proc = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", str(exe)],
        input=_conf(agent_sock, ipam={"type": "prismnet-ipam"}, mtu=1400, x=[1.5, None, True]),
        env={"CNI_COMMAND": "ADD"},
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stdout
    text = proc.stderr.decode()
    imported = {line.split("|")[-1].strip() for line in text.splitlines() if "|" in line}
    assert "cni.shim" in imported
    assert not imported & {"os", "json", "re", "socket", "site", "typing", "cni.errors", "http.client"}


def test_parse_shim_request_rejects_garbage() -> None:
    from cni.errors import DecodeFailure

    with pytest.raises(DecodeFailure):
        parse_shim_request(b"no separator")


def test_version_imports_no_json(exe: Path) -> None:
    """podman asks VERSION of every plugin before each ADD and DEL: as cheap as the ADD path."""
    proc = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", str(exe)],
        input=b'{"cniVersion":"0.4.0"}',
        env={"CNI_COMMAND": "VERSION"},
        capture_output=True,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["cniVersion"] == "0.4.0"
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert "cni.errors" in imported and not imported & {"json", "re", "os", "site"}
