"""ovs-node as booting it showed it must be (tests/integration/kubelet/test_boot_node_network.py):
br-int's datapath is a setting of k8shost-config that the bridge and ovn-controller both take (a node
without the openvswitch kernel module runs the userspace one), and a container whose startup command
talks to an ovsdb-server that a sibling container starts waits for it instead of crash-looping."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.daemonsets.rendered import containers, find, ident, workloads

Obj = dict[str, Any]
DATAPATH_TYPES = {"system", "netdev"}
STARTS_OVSDB = re.compile(r"\bovs-ctl\b[^&;|]*\bstart\b|\bovsdb-server\b")
OVS_CLIENT = re.compile(r"\b(ovs-vsctl|ovn-nbctl|ovn-sbctl)\b([^&;|]*)")


def _script(c: Obj) -> str:
    return " ".join([*(c.get("command") or []), *(c.get("args") or [])])


def _config_keys(c: Obj) -> dict[str, str]:
    """env name -> k8shost-config key, for the container's configMapKeyRef variables."""
    return {
        e["name"]: e["valueFrom"]["configMapKeyRef"]["key"]
        for e in c.get("env") or []
        if "configMapKeyRef" in e.get("valueFrom", {})
        and e["valueFrom"]["configMapKeyRef"]["name"] == "k8shost-config"
    }


def startup_clients_not_waiting(workload: Obj) -> list[str]:
    """Containers that run an OVSDB client before their daemon while a sibling container starts the
    ovsdb-server, without `--retry` (the client fails at once on the missing socket)."""
    cs = containers(workload, init=False)
    if not any(STARTS_OVSDB.search(_script(c)) for c in cs):
        return []
    bad = []
    for c in cs:
        if STARTS_OVSDB.search(_script(c)):
            continue
        for prog, rest in OVS_CLIENT.findall(_script(c)):
            if "--retry" not in rest.split():
                bad.append(f"{ident(workload)}/{c['name']}: {prog} without --retry")
    return bad


def test_br_int_datapath_comes_from_k8shost_config_in_both_containers() -> None:
    config = find("ConfigMap", "k8shost-config")["data"]
    assert config["OVS_DATAPATH_TYPE"] in DATAPATH_TYPES
    ovs_node = find("DaemonSet", "ovs-node")
    by_name = {c["name"]: c for c in containers(ovs_node)}
    for name, setting in (("openvswitch", "datapath_type"), ("ovn-controller", "ovn-bridge-datapath-type")):
        c = by_name[name]
        var = next((v for v, k in _config_keys(c).items() if k == "OVS_DATAPATH_TYPE"), None)
        assert var is not None, f"{name}: no variable from k8shost-config OVS_DATAPATH_TYPE"
        assert re.search(rf'{setting}="?\${var}\b', _script(c)), f"{name} does not set {setting} from ${var}"


@pytest.mark.parametrize("workload", workloads(), ids=ident)
def test_startup_ovsdb_clients_wait_for_a_sibling_server(workload: Obj) -> None:
    assert startup_clients_not_waiting(workload) == []


def test_the_wait_check_refuses_a_client_racing_its_server() -> None:
    racing = {
        "kind": "DaemonSet",
        "metadata": {"name": "ovs-x", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "ovs", "command": ["/bin/sh", "-c"], "args": ["ovs-ctl start && exec tail -F x"]},
            {"name": "ctl", "command": ["/bin/sh", "-c"], "args": ["ovs-vsctl set . a=b && exec x"]},
        ]}}},
    }  # fmt: skip
    assert startup_clients_not_waiting(racing) == [
        "DaemonSet/kube-system/ovs-x/ctl: ovs-vsctl without --retry"
    ]
