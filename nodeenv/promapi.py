"""Prometheus's HTTP API (/api/v1/query, /api/v1/query_range, /api/v1/targets), reached where the
server listens: on loopback of a network namespace (a node's, in `make boot --nodes N`) or of this
one. A namespace's loopback is reached with a socket made inside it (nodeenv/netns_socket.py), so
nothing is routed or forwarded for it.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodeenv.netns_socket import connected_socket

Obj = dict[str, Any]


class PromApiError(RuntimeError):
    """The server answered an error (status "error", or an HTTP error), or could not be reached."""


@dataclass(frozen=True, slots=True)
class PromApi:
    url: str
    """http://host:port of the server (Prometheus, or vmagent's targets API)."""
    netns: str = ""
    """The network namespace the server listens in ("" = this one)."""
    timeout: float = 10.0

    @classmethod
    def from_file(cls, path: Path, key: str = "prometheus") -> PromApi:
        """From the `monitoring.json` the boot writes: {"netns": ..., "prometheus": url, "vmagent": url}."""
        info = json.loads(path.read_text())
        return cls(url=info[key], netns=info.get("netns", ""))

    def get(self, path: str, params: dict[str, str] | None = None) -> Obj:
        u = urllib.parse.urlsplit(self.url)
        host, port = u.hostname or "127.0.0.1", u.port or 80
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            if self.netns:
                conn.sock = connected_socket(self.netns, host, port, self.timeout)
            query = f"?{urllib.parse.urlencode(params)}" if params else ""
            conn.request("GET", path + query)
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise PromApiError(f"{self.url}{path} ({self.netns or 'this namespace'}): {e}") from e
        finally:
            conn.close()
        try:
            doc: Obj = json.loads(body)
        except ValueError as e:
            raise PromApiError(f"{path}: HTTP {resp.status}, not JSON: {body[:200]!r}") from e
        if resp.status != 200 or doc.get("status") != "success":
            raise PromApiError(f"{path} {params or ''}: HTTP {resp.status}: {doc.get('error', doc)}")
        return doc

    def query(self, expr: str) -> list[Obj]:
        """An instant query's result: the vector's samples ({"metric": labels, "value": [t, "v"]})."""
        data = self.get("/api/v1/query", {"query": expr})["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[Obj] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Obj]:
        """A range query's matrix: [{"metric": labels, "values": [[t, "v"], ...]}, ...]."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        result: list[Obj] = self.get("/api/v1/query_range", params)["data"]["result"]
        return result

    def targets(self) -> list[Obj]:
        """The active scrape targets (labels, scrapeUrl, health "up"/"down", lastError)."""
        active: list[Obj] = self.get("/api/v1/targets")["data"]["activeTargets"]
        return active

    def ready(self) -> bool:
        try:
            self.get("/api/v1/status/buildinfo")
        except PromApiError:
            return False
        return True
