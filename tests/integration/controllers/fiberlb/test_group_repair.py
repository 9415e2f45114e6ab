"""The ovn backend's group repair (`OvnBackend.attach`, every 2 s in the controller) against the real
OVN NB: a row of ours taken out of the `fiberlb` Load_Balancer_Group by hand is put back, a new
namespace switch gets the group, and a run with nothing changed checks no row (owned_rows.py)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from controllers.fiberlb.annotations import LbOptions
from controllers.fiberlb.desired import Backend, DesiredLB, Listener
from controllers.fiberlb.ovn_backend import GROUP, OvnBackend, lb_name
from nodeenv.node import Node

pytestmark = [pytest.mark.root, pytest.mark.ovn]


def desired(name: str, vip: str) -> DesiredLB:
    listener = Listener(name="http", protocol="TCP", port=80, backends=(Backend("10.244.77.2", 8080),))
    return DesiredLB(service=f"repair/{name}", uid=f"uid-{name}", namespace="repair", vips=(vip,),
                     listeners=(listener,), options=LbOptions())  # fmt: skip


def nbctl(node: Node, *args: str) -> str:
    argv = ["ovn-nbctl", f"--db={node.endpoints['OVN_NB_DB']}", "--timeout=20", *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def members(node: Node) -> set[str]:
    out = nbctl(node, "--bare", "--columns=load_balancer", "find", "Load_Balancer_Group", f"name={GROUP}")
    return set(out.split())


def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_rows_taken_out_of_the_group_are_put_back(ovn_node: Node, nb: OvnBackend) -> None:
    for i in range(3):
        nb.apply(desired(f"svc-{i}", f"10.96.77.{i + 1}"))
    uuids = {nbctl(ovn_node, "--bare", "--columns=_uuid", "find", "Load_Balancer",
                   f'name="{lb_name(f"repair/svc-{i}", "tcp")}"') for i in range(3)}  # fmt: skip
    assert uuids <= members(ovn_node)  # the apply added each to the group
    until(lambda: nb.attach() == 0)  # the applies' own notifications checked: nothing to add

    taken = sorted(uuids)[0]
    nbctl(ovn_node, "remove", "Load_Balancer_Group", GROUP, "load_balancer", taken)
    until(lambda: taken not in members(ovn_node))
    added = 0
    deadline = time.monotonic() + 10
    while not added and time.monotonic() < deadline:  # once the IDL has the removal
        added = nb.attach()
        time.sleep(0.05)
    assert added == 1
    assert uuids <= members(ovn_node)
    assert nb.attach() == 0


def test_a_new_namespace_switch_gets_the_group(ovn_node: Node, nb: OvnBackend) -> None:
    nb.apply(desired("svc-switch", "10.96.77.9"))
    switch = "k8s-repair-new"
    nbctl(ovn_node, "ls-add", switch)
    try:
        group = nbctl(ovn_node, "--bare", "--columns=_uuid", "find", "Load_Balancer_Group", f"name={GROUP}")

        def attached() -> bool:
            nb.attach()
            return group in nbctl(ovn_node, "--bare", "--columns=load_balancer_group", "list",
                                  "Logical_Switch", switch).split()  # fmt: skip

        until(attached)
    finally:
        nbctl(ovn_node, "--if-exists", "ls-del", switch)
