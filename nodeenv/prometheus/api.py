"""A small client of Prometheus' HTTP API: instant queries, targets, alerts, and waiting on them.

Only `/api/v1/query`, `/api/v1/targets`, `/api/v1/alerts` and `/api/v1/rules` (stdlib HTTP: the
answers are small JSON). An answer with `"status": "error"` raises PrometheusApiError with
Prometheus' errorType and error.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class PrometheusApiError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Target:
    job: str
    instance: str
    health: str
    """"up", "down" or "unknown" (not scraped yet)."""
    last_error: str
    labels: dict[str, str]
    scrape_url: str


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    state: str
    """"pending" or "firing" (an alert that resolved is no longer listed)."""
    labels: dict[str, str]
    annotations: dict[str, str]
    active_at: str


class PrometheusApi:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> object:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=self.timeout) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:  # 400/422/503 carry Prometheus' error body
            body = json.loads(e.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusApiError(f"{path}: {body.get('errorType', '?')}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str) -> list[Sample]:
        """An instant vector query now (a scalar answers as one sample without labels)."""
        data = self._get("/api/v1/query", {"query": expr})
        assert isinstance(data, dict)
        if data["resultType"] == "vector":
            return [Sample(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]
        if data["resultType"] == "scalar":
            return [Sample({}, float(data["result"][1]))]
        raise PrometheusApiError(f"query {expr!r}: a {data['resultType']}, not an instant vector")

    def value(self, expr: str) -> float | None:
        """The single value of `expr`, None when it is empty."""
        samples = self.query(expr)
        if len(samples) > 1:
            raise PrometheusApiError(f"query {expr!r}: {len(samples)} series, expected one")
        return samples[0].value if samples else None

    def targets(self) -> list[Target]:
        """The active targets, after relabelling."""
        data = self._get("/api/v1/targets", {"state": "active"})
        assert isinstance(data, dict)
        return [
            Target(t["labels"].get("job", ""), t["labels"].get("instance", ""), t["health"],
                   t.get("lastError", ""), dict(t["labels"]), t.get("scrapeUrl", ""))
            for t in data["activeTargets"]
        ]  # fmt: skip

    def alerts(self) -> list[Alert]:
        data = self._get("/api/v1/alerts")
        assert isinstance(data, dict)
        return [
            Alert(a["labels"].get("alertname", ""), a["state"], dict(a["labels"]),
                  dict(a.get("annotations", {})), a.get("activeAt", ""))
            for a in data["alerts"]
        ]  # fmt: skip

    def firing(self, name: str) -> list[Alert]:
        return [a for a in self.alerts() if a.name == name and a.state == "firing"]

    def rule_groups(self) -> list[dict[str, object]]:
        data = self._get("/api/v1/rules")
        assert isinstance(data, dict)
        return list(data["groups"])

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float, poll: float = 0.5) -> float:
        """Poll until `predicate()` holds; the seconds it took. TimeoutError names `what`."""
        t0 = time.monotonic()
        while True:
            try:
                if predicate():
                    return time.monotonic() - t0
            except (PrometheusApiError, OSError):
                pass  # not ready yet, or restarting: the deadline decides
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{what}: not after {timeout:.0f} s")
            time.sleep(poll)

    def wait_targets_up(self, timeout: float = 60.0, expected: int = 0) -> list[Target]:
        """Every active target up (and at least `expected` of them); the targets."""

        def all_up() -> bool:
            ts = self.targets()
            return len(ts) >= max(expected, 1) and all(t.health == "up" for t in ts)

        try:
            self.wait(all_up, "every Prometheus target up", timeout)
        except TimeoutError as e:
            down = [
                f"{t.job} {t.instance}: {t.health} {t.last_error}" for t in self.targets() if t.health != "up"
            ]
            raise TimeoutError(f"{e}; not up: {down}") from None
        return self.targets()

    def wait_firing(self, name: str, timeout: float) -> float:
        """Seconds until alert `name` is firing."""
        return self.wait(lambda: bool(self.firing(name)), f"alert {name} firing", timeout)

    def wait_resolved(self, name: str, timeout: float) -> float:
        """Seconds until alert `name` is neither firing nor pending."""
        return self.wait(
            lambda: not any(a.name == name for a in self.alerts()), f"alert {name} resolved", timeout
        )
