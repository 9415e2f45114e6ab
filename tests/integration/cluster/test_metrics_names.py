"""Issue 32 item 2 on the session's cluster: every daemon's /metrics, scraped where Prometheus would
(each node's loopback in its namespace, the central's, the control plane's), has every name the
catalogue (common/metric_catalogue.py, the README's table) lists for it, passes `promtool check
metrics`, and says what the cluster is: each node has a Geneve tunnel to each other node, the agents'
OVSDB connections are up, the central's daemons answer (and in RAFT mode one member leads each
database)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from common import metric_catalogue as cat
from nodeenv.cluster.cluster import Cluster
from nodeenv.daemons import http_get_in
from tests.metrics_scrape import families, promtool_problems, samples, scrape


@dataclass(frozen=True)
class Target:
    component: str
    where: str
    netns: str
    url: str

    def scrape(self) -> str:
        if not self.netns:  # the control plane's daemons: this namespace
            return scrape(self.url)
        status, body = http_get_in(self.netns, self.url, timeout=10)
        assert status == 200, f"{self}: {status} {body[:200]}"
        return body


NODE_TARGETS = {cat.AGENT: "PRISMNET_METRICS", cat.FLASHDNS: "FLASHDNS_METRICS", cat.CSI: "CSI_METRICS_URL"}
CONTROLLER_TARGETS = {cat.FIBERLB: "FIBERLB_METRICS", cat.NETPOL: "NETPOL_METRICS",
                      cat.NODES: "NODE_CONTROLLER_METRICS"}  # fmt: skip


def targets(cluster: Cluster) -> Iterator[Target]:
    controllers = {n.name for n in cluster.controller_nodes()}
    for n in cluster.nodes:
        keys = {**NODE_TARGETS, **(CONTROLLER_TARGETS if n.name in controllers else {})}
        for component, key in keys.items():
            yield Target(component, n.name, n.netns, n.env[key])
    central = cluster.central.endpoints
    for i, url in enumerate(central["OVN_CENTRAL_METRICS"].split(","), 1):
        yield Target(cat.CENTRAL, f"member {i}", cluster.central.settings.netns, url)
    yield Target(cat.WEBHOOK, "control", "", cluster.control.endpoints["WEBHOOK_HEALTH_URL"] + "/metrics")


def test_every_daemon_exports_every_catalogued_name_cleanly(cluster: Cluster) -> None:
    seen: set[str] = set()
    for t in targets(cluster):
        text = t.scrape()
        assert promtool_problems(text) == "", f"{t.component} on {t.where}"
        missing = {m.name for m in cat.by_component(t.component)} - families(text)
        assert not missing, f"{t.component} on {t.where} lacks {sorted(missing)}"
        seen.add(t.component)
    # project-controller runs in `make boot` and the single node, not in cluster mode: its names are
    # the machinery's, checked here on the other controllers
    assert seen == {*NODE_TARGETS, *CONTROLLER_TARGETS, cat.CENTRAL, cat.WEBHOOK}


def _value(text: str, name: str, **labels: str) -> float:
    found = [v for got, v in samples(text).get(name, []) if all(got.get(k) == w for k, w in labels.items())]
    assert found, f"no {name}{labels}"
    return sum(found)


def test_the_figures_say_what_the_cluster_is(cluster: Cluster) -> None:
    for n in cluster.nodes:
        text = http_get_in(n.netns, n.env["PRISMNET_METRICS"], timeout=10)[1]
        assert _value(text, "prismnet_geneve_tunnels") == len(cluster.nodes) - 1, n.name
        for db in ("Open_vSwitch", "OVN_Northbound"):
            assert _value(text, "ovsdb_client_connected", database=db) == 1, (n.name, db)
        assert _value(text, "prismnet_ipam_addresses", state="free") > 0
    for text in _central(cluster):
        assert _value(text, "ovn_central_up", target="nb") == 1
        assert _value(text, "ovn_central_up", target="sb") == 1


def _central(cluster: Cluster) -> list[str]:
    return [t.scrape() for t in targets(cluster) if t.component == cat.CENTRAL]


def test_one_raft_leader_per_database(cluster: Cluster) -> None:
    if cluster.settings.ovn_central != "raft":
        pytest.skip("standalone central: no RAFT figures (K8SHOST_OVN_CENTRAL=raft for them)")
    texts = _central(cluster)
    for db in ("OVN_Northbound", "OVN_Southbound"):
        assert sum(_value(t, "ovn_raft_role", database=db, role="leader") for t in texts) == 1, db
