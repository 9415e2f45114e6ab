"""The kubelet API's own edges, without a cluster: who may call it (the API server's client
certificate only), the container it picks with kubelet's refusals, the exit Status of exec, and
SPDY framing as client-go's spdystream writes it (header blocks compressed with the protocol's
dictionary)."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import ssl
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubelet.kubeletapi import spdy
from nodeenv.kubelet.kubeletapi.pki import KubeletPki, make_kubelet_pki
from nodeenv.kubelet.kubeletapi.pods import KubeletError, log_source, running_container
from nodeenv.kubelet.kubeletapi.remotecommand import exit_status
from nodeenv.kubelet.kubeletapi.server import KubeletApiServer, KubeletApiSettings
from nodeenv.kubelet.resourcestats import Usage, render
from nodeenv.kubelet.status import ContainerState
from webhook.devcerts import issue_ca, issue_leaf, write_pair


class NoPods:
    def find_pod(self, namespace: str, name: str) -> None:
        return None

    def resource_metrics(self) -> bytes:
        return render(Usage(12.5, 1024 * 1024), [])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> KubeletPki:
    return make_kubelet_pki(tmp_path_factory.mktemp("kubelet-pki"), [("node1", "127.0.0.1")])


@pytest.fixture(scope="module")
def kubelet(pki: KubeletPki) -> Iterator[KubeletApiServer]:
    cert, key = pki.serving("node1")
    settings = KubeletApiSettings(address="127.0.0.1", port=_free_port(), cert=cert, key=key,
                                  client_ca=pki.client_ca, podman_env={})  # fmt: skip
    server = KubeletApiServer(NoPods(), settings)
    server.start()
    yield server
    server.stop()


def _get(
    server: KubeletApiServer, pki: KubeletPki, path: str, client: tuple[Path, Path] | None
) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(pki.server_ca))  # the kubelet's serving certificate
    if client is not None:
        ctx.load_cert_chain(*client)
    conn = http.client.HTTPSConnection("127.0.0.1", server.settings.port, context=ctx, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def test_api_server_certificate_is_served(kubelet: KubeletApiServer, pki: KubeletPki) -> None:
    assert _get(kubelet, pki, "/healthz", (pki.client_cert, pki.client_key)) == (200, "ok")
    assert _get(kubelet, pki, "/containerLogs/ns/p/c", (pki.client_cert, pki.client_key)) == (
        404, "pod does not exist")  # fmt: skip
    status, text = _get(kubelet, pki, "/metrics/resource", (pki.client_cert, pki.client_key))
    assert status == 200 and "node_cpu_usage_seconds_total 12.5" in text, text


def test_no_client_certificate_is_unauthorized(kubelet: KubeletApiServer, pki: KubeletPki) -> None:
    assert _get(kubelet, pki, "/healthz", None) == (401, "Unauthorized")
    assert _get(kubelet, pki, "/containerLogs/ns/p/c", None) == (401, "Unauthorized")


def test_resource_metrics_need_the_api_servers_client_certificate(
    kubelet: KubeletApiServer, pki: KubeletPki
) -> None:
    """metrics-server's path is served to the API server's certificate only: none is 401 (as the
    kubelet API refuses any path; the runner has no unauthenticated read-only port either)."""
    assert _get(kubelet, pki, "/metrics/resource", None) == (401, "Unauthorized")


def test_certificate_of_another_ca_fails_the_handshake(
    kubelet: KubeletApiServer, pki: KubeletPki, tmp_path: Path
) -> None:
    """Not signed by the client CA: the TLS handshake itself fails (kubelet: VerifyClientCertIfGiven)."""
    ca = issue_ca(cn="another CA")  # the same CA's key is not kept: a leaf of another CA...
    other = write_pair(tmp_path, "tenant", *issue_leaf(ca, "system:node:node2", client=True))
    with pytest.raises((ssl.SSLError, ConnectionError)):  # ...fails the TLS handshake itself
        _get(kubelet, pki, "/healthz", other)


def test_forbidden_user_signed_by_the_client_ca(tmp_path: Path) -> None:
    pki = make_kubelet_pki(tmp_path / "pki", [("node1", "127.0.0.1")], user="system:node:node2")
    cert, key = pki.serving("node1")
    settings = KubeletApiSettings(address="127.0.0.1", port=_free_port(), cert=cert, key=key,
                                  client_ca=pki.client_ca, podman_env={})  # fmt: skip
    server = KubeletApiServer(NoPods(), settings)
    server.start()
    client = (pki.client_cert, pki.client_key)
    try:
        status, text = _get(server, pki, "/exec/ns/p/c?command=id", client)
        metrics = _get(server, pki, "/metrics/resource", client)
    finally:
        server.stop()
    assert status == 403
    assert text == "Forbidden (user=system:node:node2, verb=get, resource=nodes, subresource=proxy)"
    assert metrics == (
        403,
        "Forbidden (user=system:node:node2, verb=get, resource=nodes, subresource=metrics)",
    )


class Pod:
    def __init__(self, main: list[ContainerState], init: list[ContainerState] | None = None) -> None:
        self.pod: dict[str, Any] = {"metadata": {"name": "web", "namespace": "ns", "uid": "u"}}
        self.main, self.init = main, init or []

    def cname(self, container: str) -> str:
        return f"k8s_{container}_web"

    @property
    def netns_name(self) -> str | None:
        return None

    def standin_log(self, container: str) -> Path:
        return Path("/logs") / container


def test_log_source_as_kubelet_picks_it() -> None:
    running = ContainerState("app", "img", state={"running": {}})
    crashed = ContainerState("side", "img", last_state={"terminated": {"containerID": "podman://abc"}})
    crashed.waiting("CrashLoopBackOff")
    init = ContainerState("setup", "img", state={"terminated": {"exitCode": 0}})
    pod = Pod([running, crashed], [init])
    assert log_source(pod, "app", previous=False).podman_ref == "k8s_app_web"
    assert log_source(pod, "setup", previous=False).podman_ref == "k8s_setup_web"
    assert log_source(pod, "side", previous=False).podman_ref == "abc"  # the last instance
    assert log_source(pod, "side", previous=True).podman_ref == "abc"
    with pytest.raises(KubeletError, match='previous terminated container "app" in pod "web" not found'):
        log_source(pod, "app", previous=True)
    waiting = Pod([ContainerState("app", "img")])
    with pytest.raises(
        KubeletError, match='container "app" in pod "web" is waiting to start: ContainerCreating'
    ):
        log_source(waiting, "app", previous=False)
    with pytest.raises(KubeletError) as e:
        running_container(pod, "side")
    assert (e.value.status, e.value.message) == (500, 'container not found ("side")')


def test_exit_status_carries_the_exit_code() -> None:
    assert exit_status(0, ["true"]) == {"metadata": {}, "status": "Success"}
    failed = exit_status(3, ["sh", "-c", "exit 3"])
    assert failed["reason"] == "NonZeroExitCode"
    assert failed["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


def _client_syn_stream(deflate: Any, stream_id: int, headers: dict[str, str]) -> bytes:
    """A SYN_STREAM as spdystream writes it: its header block from the connection's zlib stream."""
    raw = struct.pack(">I", len(headers)) + b"".join(
        struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        for k, v in headers.items()
    )
    block = deflate.compress(raw) + deflate.flush(zlib.Z_SYNC_FLUSH)
    body = struct.pack(">IIH", stream_id, 0, 0) + block
    return struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, len(body)) + body


def test_spdy_frames_both_ways() -> None:
    assert zlib.adler32(spdy.DICTIONARY) == 0xE3C6A7C2  # the SPDY/3 dictionary's id in every header block
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    first = _client_syn_stream(deflate, 1, {"streamtype": "error", "port": "80", "requestid": "0"})
    second = _client_syn_stream(deflate, 3, {"streamtype": "data", "port": "80", "requestid": "0"})
    framer = spdy.Framer()
    frames = framer.feed(first + second[:5])  # a frame split across reads
    frames += framer.feed(second[5:] + spdy.Framer.data(3, b"GET /", fin=True))
    assert [(f.kind, f.stream_id, f.header("streamtype")) for f in frames[:2]] == [
        (spdy.SYN_STREAM, 1, "error"), (spdy.SYN_STREAM, 3, "data")]  # fmt: skip
    assert (frames[2].kind, frames[2].payload, frames[2].fin) == (0, b"GET /", True)
    reply = spdy.Framer().syn_reply(3)
    inflate = zlib.decompressobj(zdict=spdy.DICTIONARY)
    assert struct.unpack(">HHI", reply[:8])[:2] == (0x8003, spdy.SYN_REPLY)
    assert inflate.decompress(reply[12:]) == b"\0\0\0\0"  # no headers


async def test_terminal_for_tty_resized_as_the_client_asks() -> None:
    """`tty=true`: the command's streams are one terminal, its size the client's (channel 4)."""
    from nodeenv.kubelet.kubeletapi import processio

    script = "read x; [ -t 0 ] && echo a-tty; stty size"
    io = await processio.start(["sh", "-c", script], {"PATH": "/usr/bin:/bin"}, stdin=True, tty=True)
    io.resize(100, 30)
    await io.write(b"go\n")
    (reader, channel), out = io.outputs[0], b""
    with contextlib.suppress(OSError):  # EIO once the command is gone
        while chunk := await asyncio.wait_for(reader.read(1024), 10):
            out += chunk
    assert await io.proc.wait() == 0
    io.close()
    assert channel == processio.STDOUT and len(io.outputs) == 1
    assert out.replace(b"\r\n", b"\n").endswith(b"a-tty\n30 100\n"), out
