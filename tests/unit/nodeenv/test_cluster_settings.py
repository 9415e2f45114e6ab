"""Cluster mode's settings and CLI: env fallbacks, names and addresses, bad input refused before
anything is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.cli import build_parser, main
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.commands import settings_from
from nodeenv.cluster.settings import ClusterSettings


def test_env_fallbacks_and_flags_win_over_them(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"K8SHOST_NODES": "5", "K8SHOST_CLUSTER_PREFIX": "k8sx", "K8SHOST_OVN_CENTRAL": "raft",
           "K8SHOST_UNDERLAY_CIDR": "10.251.0.0/24", "K8SHOST_CLUSTER_DIR": "/tmp/c",
           "K8SHOST_CONTROLLER_REPLICAS": "3"}  # fmt: skip
    assert ClusterSettings.from_env(env) == ClusterSettings(
        run_dir=Path("/tmp/c"),
        nodes=5,
        prefix="k8sx",
        ovn_central="raft",
        underlay_cidr="10.251.0.0/24",
        controller_replicas=3,
    )
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    args = build_parser().parse_args(["cluster-up", "--nodes", "2", "--controller-replicas", "1"])
    s = settings_from(args)
    assert (s.nodes, s.prefix, s.ovn_central, s.underlay_cidr) == (2, "k8sx", "raft", "10.251.0.0/24")
    assert s.controller_replicas == 1 and [s.runs_controllers(i) for i in (1, 2)] == [True, False]


def test_nodes_names_namespaces_and_addresses(tmp_path: Path) -> None:
    c = Cluster(ClusterSettings(run_dir=tmp_path, nodes=3, prefix="k8sq"))
    assert [(n.name, n.netns, n.address) for n in c.nodes] == [
        ("node1", "k8sq-node1", "10.250.0.11"),
        ("node2", "k8sq-node2", "10.250.0.12"),
        ("node3", "k8sq-node3", "10.250.0.13"),
    ]
    assert c.underlay.netns == "k8sq-underlay" and c.central.settings.netns == "k8sq-underlay"
    assert c.control.settings.netns == "", "the API double stays in this namespace, on loopback"
    assert {n.node.settings.system_id for n in c.nodes} == {"node1", "node2", "node3"}
    assert len({n.node.settings.install_root for n in c.nodes}) == 3, "one install root per node"


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (ClusterSettings(nodes=0), "0 nodes: between 1 and"),
        (ClusterSettings(ovn_central="paxos"), "OVN central 'paxos'"),
        (ClusterSettings(prefix="has space"), "prefix 'has space'"),
        (ClusterSettings(cluster_cidr="10.250.0.0/16"), "overlaps the underlay"),
        (ClusterSettings(controller_replicas=0), "0 controller replicas: at least 1"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(settings: ClusterSettings, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        Cluster(settings)


def test_cli_refuses_bad_input_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["cluster-up", "--nodes", "0", "--cluster-dir", str(tmp_path / "c")])
    assert rc == 2
    assert "cluster-up: 0 nodes: between 1 and" in capsys.readouterr().out
    assert not (tmp_path / "c").exists()
