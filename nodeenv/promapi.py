"""Prometheus's HTTP API (nodeenv/prometheus/api.py's client) reached where the server listens: on
the loopback of a network namespace (node1's, in `make boot --nodes N`) or of this one. A
namespace's loopback is reached with a socket made inside it (nodeenv/netns_socket.py), so nothing
is routed or forwarded for it. Adds range queries (the dashboards' snapshot)."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from nodeenv.netns_socket import connected_socket
from nodeenv.prometheus.api import PrometheusApi, PrometheusApiError

Series = tuple[dict[str, str], list[tuple[float, float]]]
"""A range query's series: its labels, its (time, value) points."""


class NetnsPrometheusApi(PrometheusApi):
    def __init__(self, url: str, netns: str = "", timeout: float = 10.0) -> None:
        super().__init__(url, timeout)
        self.netns = netns
        """The network namespace the server listens in ("" = this one)."""

    @classmethod
    def from_file(cls, path: Path, key: str = "prometheus") -> NetnsPrometheusApi:
        """From the `monitoring.json` the boot writes: {"netns": ..., "prometheus": url, "vmagent": url}."""
        info = json.loads(path.read_text())
        return cls(info[key], info.get("netns", ""))

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> object:
        if not self.netns:
            return super()._get(path, params)
        u = urllib.parse.urlsplit(self.url)
        host, port = u.hostname or "127.0.0.1", u.port or 80
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.sock = connected_socket(self.netns, host, port, self.timeout)
            conn.request("GET", path + (f"?{urllib.parse.urlencode(params)}" if params else ""))
            body = json.loads(conn.getresponse().read() or b"{}")
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise PrometheusApiError(f"{self.url}{path} in {self.netns}: {e}") from e
        finally:
            conn.close()
        if body.get("status") != "success":
            raise PrometheusApiError(f"{path}: {body.get('errorType', '?')}: {body.get('error', body)}")
        return body["data"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = self._get("/api/v1/query_range", params)
        assert isinstance(data, dict)
        return [(dict(r["metric"]), [(float(t), float(v)) for t, v in r["values"]]) for r in data["result"]]

    def answers(self) -> bool:
        """Whether the server answers its API (Prometheus, or vmagent's targets)."""
        try:
            self._get("/api/v1/targets")
        except (PrometheusApiError, OSError, ValueError):  # ValueError: a plain-text 503 while starting
            return False
        return True
