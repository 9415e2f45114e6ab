"""Issue 32 item 2 on the session's cluster: every daemon's /metrics, scraped where Prometheus would
(each node's loopback in its namespace, the central's, the control plane's), has every name the
catalogue (common/metric_catalogue.py, docs/monitoring.md's table) lists for it, passes `promtool check
metrics`, and says what the cluster is: each node has a Geneve tunnel to each other node, the agents'
OVSDB connections are up, the central's daemons answer (and in RAFT mode one member leads each
database)."""

from __future__ import annotations

import pytest

from common import metric_catalogue as cat
from nodeenv.cluster.cluster import Cluster
from nodeenv.metrics_scrape import Target, missing_names, promtool_problems, targets, value


def all_targets(cluster: Cluster) -> list[Target]:
    env = {**cluster.load(), **cluster.control.endpoints}
    return list(targets([(n.name, n.netns, n.env) for n in cluster.nodes], env))


def test_every_daemon_exports_every_catalogued_name_cleanly(cluster: Cluster) -> None:
    found = all_targets(cluster)
    for t in found:
        text = t.scrape()
        assert promtool_problems(text) == "", f"{t.component} on {t.where}"
        assert not missing_names(t, text), (
            f"{t.component} on {t.where} lacks {sorted(missing_names(t, text))}"
        )
    by_component = {
        c: sorted(t.where for t in found if t.component == c) for c in {t.component for t in found}
    }
    nodes, controllers = [n.name for n in cluster.nodes], [n.name for n in cluster.controller_nodes()]
    # project-controller runs in `make boot` and the single node, not in cluster mode: its names are the
    # machinery's, checked here on the other controllers
    assert by_component == {
        cat.AGENT: nodes, cat.FLASHDNS: nodes, cat.CSI: nodes,
        cat.FIBERLB: controllers, cat.NETPOL: controllers, cat.NODES: controllers,
        cat.CENTRAL: [f"member {i}" for i in range(1, 4 if cluster.settings.ovn_central == "raft" else 2)],
        cat.WEBHOOK: ["control"],
    }  # fmt: skip


def test_the_figures_say_what_the_cluster_is(cluster: Cluster) -> None:
    for t in all_targets(cluster):
        text = t.scrape()
        if t.component == cat.AGENT:
            assert value(text, "prismnet_geneve_tunnels") == len(cluster.nodes) - 1, t.where
            for db in ("Open_vSwitch", "OVN_Northbound"):
                assert value(text, "ovsdb_client_connected", database=db) == 1, (t.where, db)
            free = value(text, "prismnet_ipam_addresses", state="free")
            assert free is not None and free > 0
        if t.component == cat.CENTRAL:
            assert (
                value(text, "ovn_central_up", target="nb") == value(text, "ovn_central_up", target="sb") == 1
            )


def test_one_raft_leader_per_database(cluster: Cluster) -> None:
    if cluster.settings.ovn_central != "raft":
        pytest.skip("standalone central: no RAFT figures (K8SHOST_OVN_CENTRAL=raft for them)")
    texts = [t.scrape() for t in all_targets(cluster) if t.component == cat.CENTRAL]
    for db in ("OVN_Northbound", "OVN_Southbound"):
        leaders = [value(text, "ovn_raft_role", database=db, role="leader") or 0.0 for text in texts]
        assert sorted(leaders) == [0.0, 0.0, 1.0], (db, leaders)
        assert {value(text, "ovn_raft_cluster_servers", database=db) for text in texts} == {3.0}
