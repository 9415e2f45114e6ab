"""`k8shost-node sandbox`'s choices before anything starts, and the scenario's places and table."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.cli import main
from nodeenv.node import Node, NodeSettings
from nodeenv.scenario import Place, Scenario


def test_two_nodes_are_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "--nodes", "2", "--sandbox-dir", "/tmp/x"]) == 2
    assert "one node (--nodes 1) or on 3 or more" in capsys.readouterr().out


def test_a_deep_run_dir_is_no_refusal_but_a_runtime_dir_too_long_for_sockets_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_runtime, deep = tmp_path / ("r" * 60), tmp_path / ("d" * 120)
    assert main(["sandbox", "--sandbox-dir", str(deep), "--runtime-dir", str(long_runtime)]) == 2
    out = capsys.readouterr().out
    assert "too long for the unix sockets" in out and "K8SHOST_RUNTIME_DIR" in out
    assert not long_runtime.exists() and not deep.exists()


def test_places_go_round_the_nodes_and_the_table_names_them() -> None:
    nodes = [Place(f"node{i}", f"k8shs-node{i}", {}, Path("/")) for i in (1, 2, 3)]
    scn = Scenario(Node(NodeSettings(run_dir=Path("/nonexistent")), []), places=nodes)
    assert [scn.at(i).name for i in range(5)] == ["node1", "node2", "node3", "node1", "node2"]
    assert scn.at(1).argv(["ping"]) == ["ip", "netns", "exec", "k8shs-node2", "ping"]
    with scn.step("a: across", on=scn.where(scn.at(0), scn.at(3), scn.at(1))) as step:
        step.detail = "a figure"
    with pytest.raises(RuntimeError), scn.step("b: control"):
        raise RuntimeError("broken")
    lines = scn.table().splitlines()
    assert lines[0].split() == ["step", "node", "result", "time"]
    assert lines[2].split()[2:4] == ["node1,node2", "ok"] and lines[3].strip() == "a figure"
    assert lines[4].split()[2:4] == ["control", "FAILED"] and "RuntimeError: broken" in lines[5]


def test_on_one_node_every_place_is_that_node() -> None:
    node = Node(NodeSettings(run_dir=Path("/nonexistent")), [])
    scn = Scenario(node)
    assert {scn.at(i).name for i in range(3)} == {"node"} and scn.at(2).argv(["ping"]) == ["ping"]
    with scn.step("x"):
        pass
    assert scn.results[0].node == "node"
