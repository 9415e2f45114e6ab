"""Issue 29, "addresses conflicting after restarts": the running agent keeps its node's rows, and no
switch is ever created with a subnet overlapping another's.

Before: node-controller released a live node's management switch (its Node deleted, or a test listing
Nodes without it); the agent never wrote it back, the next namespace switch was carved from the freed
subnet and a pod got the management port's own address (b04a592).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from cni.management import management_names
from cni.ovn import connect
from cni.ovn_nb import Northbound, SubnetOverlap
from controllers.nodes.release import _ReleaseNb
from tests.integration.cni.conftest import Agent, Pods, ping, pod_ip

pytestmark = [pytest.mark.root, pytest.mark.ovn]
WRITE_BACK_TIMEOUT = 10.0


def _management(agent: Agent) -> tuple[str, str, str]:
    """(switch, its OVN IPAM subnet, the management port's 'MAC IP')."""
    switch, lsp = management_names(agent.node.settings.system_id)
    subnet = agent.nbctl("--if-exists", "get", "Logical_Switch", switch, "other_config:subnet").strip()
    port = agent.nbctl("--if-exists", "get", "Logical_Switch_Port", lsp, "addresses").strip()
    return switch, subnet.strip('"'), port.strip('[]"')


def _released(agent: Agent, switch: str) -> None:
    """node-controller's own release of the node's NB rows (its SB chassis left alone: ovn-controller
    of this session's node keeps running)."""
    db = connect(agent.node.endpoints["OVN_NB_DB"], "OVN_Northbound")
    try:
        _ReleaseNb(db.api, agent.node.settings.system_id).execute(check_error=True)
    finally:
        db.stop()


def _switch_deleted(agent: Agent, switch: str) -> None:
    """An admin's `ovn-nbctl ls-del`: the switch and its ports go, its router port stays behind."""
    agent.nbctl("ls-del", switch)


@pytest.mark.parametrize("delete", [_released, _switch_deleted], ids=["node-controller-release", "ls-del"])
def test_the_management_switch_deleted_under_the_agent_comes_back(
    agent: Agent,
    pods: Pods,
    delete: Callable[[Agent, str], None],
    record_property: Callable[[str, object], None],
) -> None:
    switch, subnet, addresses = _management(agent)
    assert subnet and addresses, "the session's agent has its management switch and port"
    started = time.monotonic()
    delete(agent, switch)
    while "" in (now := _management(agent)) and time.monotonic() - started < WRITE_BACK_TIMEOUT:
        time.sleep(0.01)
    took = time.monotonic() - started
    record_property("write_back_seconds", round(took, 3))
    print(f"management switch written back in {took:.3f} s")
    assert now == (switch, subnet, addresses), "written back with its subnet and the port's MAC and address"
    router_port = agent.nbctl("get", "Logical_Router_Port", f"rtr-{switch}", "networks")
    gateway = next(ipaddress.IPv4Network(subnet).hosts())
    assert f"{gateway}/{ipaddress.IPv4Network(subnet).prefixlen}" in router_port
    # a namespace's first pod after that: its switch carved elsewhere, and the node reachable again
    netns, _cid, result = pods.add(f"mgmtkept{os.getpid()}-{delete.__name__.strip('_')[:4]}", "p")
    assert ipaddress.IPv4Address(pod_ip(result)) not in ipaddress.IPv4Network(subnet)
    ping(netns, addresses.split()[1], timeout=10)


def test_a_switch_overlapping_another_is_refused(agent: Agent, pods: Pods, tmp_path: Path) -> None:
    switch, subnet, addresses = _management(agent)
    inside = next(ipaddress.IPv4Network(subnet).subnets(new_prefix=26))
    db = connect(agent.node.endpoints["OVN_NB_DB"], "OVN_Northbound")
    try:
        nb = Northbound(db, owner="test")
        for given, as_carved in ((ipaddress.IPv4Network(subnet), True), (inside, False)):
            with pytest.raises(SubnetOverlap, match=f"overlaps {subnet} of switch {re.escape(switch)}"):
                nb.ensure_switch("k8s-overlap-test", ipaddress.IPv4Network("10.0.0.0/8"), 24, given,
                                 str(next(given.hosts())), as_carved=as_carved)  # fmt: skip
    finally:
        db.stop()
    assert "k8s-overlap-test" not in agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
    # through the CNI: a delegated IPAM handing out addresses of the management switch's subnet
    plugin = {**agent.conflist["plugins"][0], "ipam": {
        "type": "host-local", "subnet": str(inside), "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": str(tmp_path)}}  # fmt: skip
    rt = agent.runtime({**agent.conflist, "plugins": [plugin]})
    _name, path = pods.netns()
    namespace = f"overlap{os.getpid()}"
    call = rt.add("ov" + "0" * 30, path, args=f"K8S_POD_NAMESPACE={namespace};K8S_POD_NAME=p")
    assert call.rc != 0 and call.out["code"] == 102, call.out
    assert f"overlaps {subnet} of switch {switch}" in str(call.out["msg"]), call.out
    assert f"k8s-{namespace}" not in agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
    held = tmp_path / str(agent.conflist["name"])
    assert not held.exists() or not [p for p in held.iterdir() if p.name[0].isdigit()], "address released"
    text = urllib.request.urlopen(agent.env["PRISMNET_METRICS"], timeout=5).read().decode()
    refused = re.search(r"^prismnet_switch_subnet_overlaps_refused_total (\S+)$", text, re.M)
    assert refused and float(refused.group(1)) >= 1, json.dumps(call.out)
    assert _management(agent) == (switch, subnet, addresses), "the management switch untouched"
