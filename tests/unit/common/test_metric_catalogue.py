"""The catalogue of metrics (common/metric_catalogue.py) is what the code registers, component by
component (no name missing, none undocumented), its names follow Prometheus' conventions, and the
table in docs/monitoring.md is rendered from it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from common import metric_catalogue as cat
from nodeenv.metrics_scrape import families

ROOT = Path(__file__).resolve().parents[3]
BEGIN, END = "<!-- metrics table: begin -->", "<!-- metrics table: end -->"


def _names(*registries: CollectorRegistry) -> set[str]:
    return {n for r in registries for n in families(generate_latest(r).decode())}


def machinery() -> CollectorRegistry:
    from controllers.machinery import MachineryMetrics

    return MachineryMetrics().registry


def with_ovsdb(r: CollectorRegistry) -> CollectorRegistry:
    from ovnaccess.metrics import OvsdbClientMetrics

    OvsdbClientMetrics(r)
    return r


def agent() -> set[str]:
    from cni.daemon.metrics import AgentSources, Metrics
    from cni.ovn_controller_probe import OvnControllerProbe

    m = Metrics(AgentSources(lambda: None, ipaddress.IPv4Network("10.244.0.0/16"), 24))
    m.registry.register(OvnControllerProbe(ROOT / "no-such-rundir"))  # as main() does with --ovn-rundir
    return _names(m.registry)


def netpol() -> set[str]:
    from controllers.netpol.reconcile import NetpolMetrics

    r = with_ovsdb(machinery())
    NetpolMetrics(r)
    return _names(r)


def fiberlb() -> set[str]:
    from controllers.fiberlb.ippool import IpPool
    from controllers.fiberlb.metrics import FiberlbMetrics

    r = with_ovsdb(machinery())
    pool = IpPool.from_text("192.0.2.0/30")
    FiberlbMetrics(r, lambda: pool, lambda: 0)
    return _names(r)


def nodes() -> set[str]:
    from controllers.nodes.main import released_counter

    r = with_ovsdb(machinery())
    released_counter(r)
    return _names(r)


def flashdns() -> set[str]:
    from controllers.flashdns.main import DnsCollector
    from controllers.flashdns.server import DnsServer
    from controllers.flashdns.zone import Zone

    zone = Zone("cluster.local")
    r = machinery()
    r.register(DnsCollector(SimpleNamespace(zone=zone, server=DnsServer(zone, None))))  # type: ignore[arg-type]
    return _names(r)


def webhook() -> set[str]:
    from webhook.metrics import Metrics

    return _names(Metrics(None, lambda: 0, lambda: 0.0, lambda: 0).registry)


def csi() -> set[str]:
    from csi.server import RpcMetrics

    r = CollectorRegistry()
    RpcMetrics(r)
    return _names(r)


def central() -> set[str]:
    from ovnaccess.central_exporter import Snapshot, render
    from ovnaccess.central_status import RaftStatus

    raft = RaftStatus("leader", 1, 1, 3, True)
    return families(render(Snapshot({"nb": True}, {"nb": raft}, "active")).decode())


REGISTRIES: dict[str, Callable[[], set[str]]] = {
    cat.AGENT: agent, cat.NETPOL: netpol, cat.PROJECTS: lambda: _names(machinery()), cat.NODES: nodes,
    cat.FIBERLB: fiberlb, cat.FLASHDNS: flashdns, cat.CSI: csi, cat.WEBHOOK: webhook, cat.CENTRAL: central,
}  # fmt: skip


@pytest.mark.parametrize("component", list(REGISTRIES))
def test_the_catalogue_lists_exactly_what_the_component_registers(component: str) -> None:
    listed = {m.name for m in cat.by_component(component)}
    registered = REGISTRIES[component]()
    assert registered - listed == set(), "registered but not in the catalogue (nor docs/monitoring.md)"
    assert listed - registered == set(), "in the catalogue but not registered"


def test_names_follow_prometheus_conventions() -> None:
    names = [m.name for m in cat.CATALOGUE]
    assert len(names) == len(set(names))
    for m in cat.CATALOGUE:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", m.name), m.name
        assert m.type in ("counter", "gauge", "histogram"), m.name
        assert m.name.endswith("_total") == (m.type == "counter"), f"{m.name}: only counters end in _total"
        if m.type == "histogram":
            assert m.name.endswith("_seconds"), f"{m.name}: our histograms are latencies, in seconds"
        assert not {"pod", "namespace", "node", "ip", "service", "uid"} & set(m.labels), (
            f"{m.name}: unbounded"
        )


def test_the_monitoring_page_table_is_the_catalogue() -> None:
    page = (ROOT / "docs" / "monitoring.md").read_text()
    assert BEGIN in page and END in page, f"docs/monitoring.md needs {BEGIN} ... {END} around the table"
    table = page.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert table == cat.markdown_table(), "regenerate it: python -m common.metric_catalogue > table"
