"""Each fault of issue 32 item 4 fires its alert in the cluster's own Prometheus (nodeenv/cluster/
monitoring.py, the rules of daemonsets/monitoring/rules.yml as shipped) within the rule's `for:` plus two
scrape intervals, and the alert resolves after the repair; seconds to fire and to resolve are printed
(and kept in <run>/alert-times.txt) for the table of the closing note.

This module's own 3-node cluster, OVN central as RAFT clusters, Prometheus scraping and evaluating every
2 s (K8SHOST_SCRAPE_INTERVAL; the rules' `for:` and windows are the shipped ones). Faults, together
from the module's start (`Background`): ovn-controller killed on node2 (restarted), the NB RAFT leader
killed (restarted), the FiberLB pool exhausted by 254 LoadBalancer Services (some deleted), the JWKS of
an IAM webhook unreachable (its issuer stopped, then started again). Then, once the OVN and pool faults
are over and the RAFT clusters whole: node3 lost (every daemon killed; repaired by removing it, as
deleting its Node object takes its pods' targets away), beside the JWKS's last minute.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from nodeenv.cluster import faults
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.monitoring import RULES, prometheus_dir
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import list_netns
from nodeenv.daemons import start_foreground, wait_for
from nodeenv.node import read_env_file
from nodeenv.ovn_central import Member
from nodeenv.prometheus import PrometheusApi, write_file_sd
from tests.conftest import require_ovn
from tests.integration.cluster.kube import Api, eventually, ingress, namespace, service
from tests.unit.webhook.webhook_kit import jwks_doc, signing_key
from webhook.devcerts import gen_dev_pki
from webhook.settings import PkiSettings

PREFIX = "k8shm"
INTERVAL = 2.0
"""Scrape and rule evaluation interval of this cluster's Prometheus, seconds."""
POLL = 1.0
"""How late this test may see a change through the API (its polling, the API's answer)."""
TIMES: list[tuple[str, str, float, float]] = []


def for_seconds(alert: str) -> float:
    rule = next(
        r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if r.get("alert") == alert
    )
    m = re.fullmatch(r"(\d+)([smh])", rule.get("for", "0s"))
    assert m, rule.get("for")
    return int(m[1]) * {"s": 1, "m": 60, "h": 3600}[m[2]]


@pytest.fixture(scope="module")
def cluster(short_tmp: Path) -> Iterator[Cluster]:
    require_ovn()
    settings = ClusterSettings(run_dir=short_tmp / "alerts", nodes=3, prefix=PREFIX, ovn_central="raft",
                               cluster_cidr="10.92.0.0/16", scrape_interval=f"{INTERVAL:.0f}s")  # fmt: skip
    c = Cluster(settings)
    c.up()
    try:
        yield c
    finally:
        table = "\n".join(f"{a:32} {f:44} {s:6.1f} {r:6.1f}" for a, f, s, r in TIMES)
        print(f"\nalert, fault, seconds to fire, seconds to resolve (interval {INTERVAL:.0f} s):\n{table}")
        c.down()
        assert list_netns(PREFIX) == []


@pytest.fixture(scope="module")
def prom(cluster: Cluster) -> PrometheusApi:
    api = PrometheusApi(read_env_file(cluster.env_file)["PROMETHEUS_URL"])
    targets = api.wait_targets_up(timeout=60, expected=16)
    assert {t.labels["job"] for t in targets} >= {
        "prismnet-agent", "lightningstor-csi", "flashdns-controller", "fiberlb-controller",
        "netpol-controller", "node-controller", "iam-webhook",
    }  # fmt: skip
    return api


@dataclass
class Alerting:
    api: PrometheusApi
    log: Path

    def fire_and_resolve(
        self, alert: str, fault: str, labels: dict[str, str], inject: Callable[[], object],
        repair: Callable[[], object], resolve_within: float = 2 * INTERVAL, shows_within: float = 0.0,
    ) -> None:  # fmt: skip
        """Inject (returns once the fault holds); the alert firing (with `labels`) within its for + 2
        intervals of the fault showing in the metric (`shows_within` of the injection: a daemon that
        notices it on its own schedule); repair (returns once the repair holds); the alert neither firing
        nor pending within `resolve_within` of that (+ this test's polling)."""
        api, limit = self.api, shows_within + for_seconds(alert) + 2 * INTERVAL + POLL
        assert not [a for a in api.alerts() if a.name == alert], f"{alert} active before the fault"
        inject()
        t0 = time.monotonic()
        api.wait(lambda: any(labels.items() <= a.labels.items() for a in api.firing(alert)),
                 f"{alert} firing after {fault}", timeout=limit + 60)  # fmt: skip
        fired = time.monotonic() - t0
        repair()  # returns once the repair holds (a node's removal takes seconds under load)
        t1 = time.monotonic()
        api.wait_resolved(alert, timeout=resolve_within + POLL + 60)
        resolved = time.monotonic() - t1
        TIMES.append((alert, fault, fired, resolved))
        with self.log.open("a") as f:
            f.write(f"{alert}\t{fault}\t{fired:.1f}\t{resolved:.1f}\n")
        assert fired <= limit, (
            f"{alert} fired {fired:.1f} s after {fault}: later than for + 2 intervals ({limit:g} s)"
        )
        assert resolved <= resolve_within + POLL, f"{alert} resolved {resolved:.1f} s after the repair"


@pytest.fixture(scope="module")
def alerting(cluster: Cluster, prom: PrometheusApi) -> Alerting:
    return Alerting(prom, cluster.settings.run_dir / "alert-times.txt")


class Background:
    """Faults that do not disturb one another, each in a thread of its own from the module's first
    test on, so their for: windows pass together: node2's ovn-controller, the LB pool and an issuer's
    JWKS beside the NB leader's death. Each one's test joins it and raises what it raised."""

    def __init__(self) -> None:
        self.threads: dict[str, threading.Thread] = {}
        self.failed: dict[str, BaseException] = {}

    def start(self, name: str, fn: Callable[[], object]) -> None:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # its own test raises it
                self.failed[name] = e

        self.threads[name] = t = threading.Thread(target=run, name=f"alert-{name}", daemon=True)
        t.start()

    def result(self, name: str, timeout: float = 600) -> None:
        t = self.threads[name]
        t.join(timeout)
        assert not t.is_alive(), f"{name}: not done within {timeout:.0f} s"
        if name in self.failed:
            raise self.failed[name]

    def join(self, *names: str, timeout: float = 600) -> None:
        """Until the faults `names` (all: none named) are over, however they ended."""
        for name, t in self.threads.items():
            if name in names or not names:
                t.join(timeout)


@pytest.fixture(scope="module")
def background(
    cluster: Cluster, alerting: Alerting, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Background]:
    bg = Background()
    bg.start("ovn-controller", lambda: ovn_controller_killed(cluster, alerting))

    def pool_once_the_leader_is_seen_down() -> None:
        """254 Services made at once load the cluster for seconds: not while the NB leader's death
        is still to be seen (its alert pending first), as its fire time counts from the kill."""
        api = alerting.api
        api.wait(lambda: any(a.name == "OvnCentralComponentDown" for a in api.alerts()),
                 "OvnCentralComponentDown pending", timeout=60)  # fmt: skip
        pool_exhausted(cluster, alerting)

    bg.start("pool", pool_once_the_leader_is_seen_down)
    bg.start("jwks", lambda: jwks_unreachable(cluster, alerting, tmp_path_factory.mktemp("jwks")))
    try:
        yield bg
    finally:
        bg.join()


def ovn_controller_killed(cluster: Cluster, alerting: Alerting) -> None:
    n = cluster.nodes[1]
    alerting.fire_and_resolve(
        "OvnControllerDown", f"ovn-controller killed on {n.name}", {"node": n.name},
        inject=lambda: faults.kill(n.node, "ovn-controller"),
        repair=lambda: faults.restart_ovn_controller(n),
    )  # fmt: skip


def test_nb_leader_killed_fires_ovn_central_component_down(
    cluster: Cluster, alerting: Alerting, background: Background
) -> None:
    killed: list[Member] = []

    def inject() -> None:
        m, _ = faults.kill_leader(cluster, "nb")
        killed.append(m)

    alerting.fire_and_resolve(
        "OvnCentralComponentDown", "the NB RAFT leader killed", {"target": "nb"},
        inject=inject, repair=lambda: faults.restart_member(cluster, killed[0]),
    )  # fmt: skip
    faults.wait_whole(cluster, timeout=30)


def test_ovn_controller_killed_fires_ovn_controller_down(background: Background) -> None:
    background.result("ovn-controller")


def test_pool_exhausted_fires_fiberlb_pool_exhausted(background: Background) -> None:
    background.result("pool")


def pool_exhausted(cluster: Cluster, alerting: Alerting) -> None:
    api = Api(cluster)
    api.create(namespace("alert-lb"))
    ports = [{"name": "http", "port": 80, "protocol": "TCP"}]
    pool = 254  # 198.51.100.0/24, the cluster's external IP pool

    def exhaust() -> None:
        """Every address allocated: the last Service has its external IP (then the pool is empty)."""
        for i in range(pool):
            api.create(service(f"lb{i}", "alert-lb", ports))
        last = eventually(
            lambda: api.get("Service", "alert-lb", f"lb{pool - 1}"), lambda s: bool(ingress(s)), 120
        )
        assert ingress(last), "the pool's last address was never allocated"

    def free_some() -> None:
        for i in range(10):
            api.delete("Service", "alert-lb", f"lb{i}")

    try:
        alerting.fire_and_resolve("FiberlbPoolExhausted", f"the LB pool exhausted ({pool} Services)", {},
                                  inject=exhaust, repair=free_some)  # fmt: skip
    finally:
        api.delete_all()


class JwksIssuer:
    """The issuer's JWKS over HTTPS on a fixed loopback port, in a thread; stop() makes it unreachable."""

    def __init__(self, doc: dict[str, Any], cert: Path, key: Path) -> None:
        self.doc, self.port = doc, 0
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(cert, key)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/.well-known/jwks.json"

    async def _jwks(self, request: web.Request) -> web.Response:
        return web.json_response(self.doc)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/jwks.json", self._jwks)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=self.tls).start()
        self.port = self.runner.addresses[0][1]

    async def _stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def start(self) -> None:
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)


def jwks_unreachable(cluster: Cluster, alerting: Alerting, tmp_path: Path) -> None:
    """An iam-webhook (the daemon, as `iam-webhook serve` runs) whose keys come from an issuer's JWKS
    (refreshed every 2 s here), scraped by the cluster's Prometheus as an extra target."""
    pki = gen_dev_pki(PkiSettings(out=tmp_path / "pki", server_names=("localhost", "127.0.0.1")))
    issuer = JwksIssuer(jwks_doc(signing_key("ES256")), pki["server_cert"], pki["server_key"])
    issuer.start()
    ports = tmp_path / "ports.json"
    argv = [sys.executable, "-m", "webhook.main", "serve", "--host", "127.0.0.1", "--port", "0",
            "--health-host", "127.0.0.1", "--health-port", "0", "--port-file", str(ports),
            "--tls-cert", str(pki["server_cert"]), "--tls-key", str(pki["server_key"]),
            "--client-ca", str(pki["ca"]), "--client-cn", "k8s-apiserver", "--issuer", "https://iam.test",
            "--audience", "k8shost", "--jwks-url", issuer.url, "--jwks-ca", str(pki["ca"]),
            "--jwks-refresh", "2", "--jwks-min-refresh", "2"]  # fmt: skip
    env = {k: v for k, v in cluster.control.process_env().items() if not k.startswith("IAM_")}
    _, proc = start_foreground(
        "iam-webhook-jwks", argv, tmp_path / "webhook.log", env, cluster.control.daemons
    )
    extra = prometheus_dir(cluster.control) / "extra.yml"
    try:
        wait_for(ports.exists, "the JWKS webhook's port file", proc=proc)
        health = json.loads(ports.read_text())["health"]
        write_file_sd(extra, [([f"127.0.0.1:{health}"], {"job": "iam-webhook", "keys": "jwks"})])

        def scraped():
            return any(t.labels.get("keys") == "jwks" and t.health == "up" for t in alerting.api.targets())

        alerting.api.wait(scraped, "the JWKS webhook scraped", 30)
        alerting.fire_and_resolve(
            "IamWebhookJwksRefreshFailing", "the webhook's JWKS unreachable",
            {"instance": f"127.0.0.1:{health}"},
            inject=issuer.stop, repair=issuer.start, resolve_within=60 + 3 * INTERVAL,  # increase(...[1m])
            shows_within=2.0,  # the first failed fetch: at the next refresh (--jwks-refresh 2)
        )  # fmt: skip
    finally:
        write_file_sd(extra, [])
        cluster.control.daemons.stop("iam-webhook-jwks")
        issuer.stop()


def test_node_lost_fires_node_unreachable(
    cluster: Cluster, alerting: Alerting, background: Background
) -> None:
    background.join("ovn-controller", "pool")  # node3's RAFT members go with it: no OVN fault beside
    faults.wait_whole(cluster, timeout=30)
    n = cluster.nodes[2]
    alerting.fire_and_resolve(
        "K8shostNodeUnreachable", f"{n.name} lost (every daemon killed)", {"node": n.name},
        inject=lambda: faults.kill_node(n), repair=lambda: cluster.remove(n),
        # file_sd re-read every 5 s; Prometheus's discovery manager then passes target changes to
        # scraping at most every 5 s (its update throttle); the series go stale, then an evaluation
        resolve_within=5 + 5 + 2 * INTERVAL,
    )  # fmt: skip


def test_jwks_unreachable_fires_jwks_refresh_failing(background: Background) -> None:
    background.result("jwks")  # last: its resolve window (increase()[1m]) the longest
