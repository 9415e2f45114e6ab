"""The netns proxy (nodeenv/prometheus/netns_proxy.py), run as its entry point, reached as Prometheus
reaches it (an absolute-form GET to a proxy): a route's namespace loopback answered; a method other than
GET, a name not in the routes file, a namespace gone and a port nobody listens on refused with 405, 403,
502, 502; a route added to the file used at once."""

from __future__ import annotations

import http.client
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.daemons import wait_for
from nodeenv.netns_socket import listening_socket
from nodeenv.prometheus.netns_proxy import write_routes
from tests.conftest import require_root

NETNS = f"k8sal-px{os.getpid() % 10000}"
BODY = b"demo_value 1\n"


class Handler(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        Handler.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 inside a namespace of this test's own; its port."""
    require_root()
    subprocess.run(["ip", "netns", "add", NETNS], check=True)
    subprocess.run(["ip", "-n", NETNS, "link", "set", "lo", "up"], check=True)
    sock = listening_socket(NETNS, "127.0.0.1", 0)
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield sock.getsockname()[1]
    server.shutdown()
    sock.close()
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    routes, port_file = tmp_path / "routes.json", tmp_path / "port"
    write_routes(routes, {})
    argv = [sys.executable, "-m", "nodeenv.prometheus.netns_proxy", "--routes-file", str(routes)]
    proc = subprocess.Popen([*argv, "--port-file", str(port_file)])
    try:
        wait_for(port_file.exists, "the proxy's port file", proc=proc)  # type: ignore[arg-type]
        yield int(port_file.read_text()), routes
    finally:
        proc.terminate()
        proc.wait(10)


def via(proxy_port: int, method: str, url: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    try:
        conn.request(method, url)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_routes_into_the_namespace_and_refuses_the_rest(served: int, proxy: tuple[int, Path]) -> None:
    port, routes = proxy
    Handler.seen.clear()
    assert via(port, "GET", f"http://node1:{served}/metrics")[0] == 403  # no route yet: never connected
    assert Handler.seen == []
    write_routes(routes, {"node1": NETNS, "gone": "k8sal-nonexistent"})
    assert via(port, "GET", f"http://node1:{served}/metrics?x=1") == (200, BODY)
    assert Handler.seen == ["/metrics?x=1"]
    assert via(port, "POST", f"http://node1:{served}/metrics")[0] == 405
    assert via(port, "GET", f"http://other:{served}/metrics")[0] == 403
    status, body = via(port, "GET", f"http://gone:{served}/metrics")
    assert status == 502 and b"does not exist" in body
    free = served + 1 if served < 65535 else served - 1
    status, body = via(port, "GET", f"http://node1:{free}/metrics")
    assert status == 502 and b"refused" in body.lower()
    assert Handler.seen == ["/metrics?x=1"]
