"""kubelet's read-only port (--read-only-port, plain HTTP, 10255 when on): `/metrics/resource`
(resourcestats.py, what metrics-server scrapes) and `/healthz`, on the node's address. Anything
else is 404. A ThreadingHTTPServer on its own thread; the runner stops it with the node."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)
READ_ONLY_PORT = 10255
"""kubelet's default --read-only-port (boot turns it on; metrics-server scrapes it here)."""
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class ReadOnlyPort:
    def __init__(self, host: str, port: int, resource_metrics: Callable[[], bytes]) -> None:
        metrics = resource_metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/metrics/resource":
                    self._send(200, metrics(), PROMETHEUS_TEXT)
                elif path == "/healthz":
                    self._send(200, b"ok", "text/plain; charset=utf-8")
                else:
                    self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("read-only port: " + format, *args)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="read-only-port", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("read-only port on %s:%d (/metrics/resource)", *self.server.server_address[:2])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
