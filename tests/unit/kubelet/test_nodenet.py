"""nodenet's host setup reaches the booted ovs-vswitchd's control socket by its path: the ovs-node
pod has no hostPID, so its pidfile holds a PID of the pod's own PID namespace, which
`ovs-appctl -t ovs-vswitchd` on the host would take for a dead process (and delete the pidfile)."""

from __future__ import annotations

import socket
from pathlib import Path

from nodeenv.kubelet.nodenet import BootNode


def _node(root: Path) -> BootNode:
    node = BootNode("node1", 1, "k8sx-node1", "10.250.0.11", 24, root)
    node.ovs_rundir.mkdir(parents=True)
    return node


def test_the_control_socket_named_by_the_pods_pid(tmp_path: Path) -> None:
    node = _node(tmp_path)
    assert node.vswitchd_ctl() is None  # OVS not up yet
    (node.ovs_rundir / "ovs-vswitchd.pid").write_text("39\n")
    assert node.vswitchd_ctl() is None  # pidfile written, socket not yet
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(node.ovs_rundir / "ovs-vswitchd.39.ctl"))
        assert node.vswitchd_ctl() == node.ovs_rundir / "ovs-vswitchd.39.ctl"
    assert (node.ovs_rundir / "ovs-vswitchd.pid").read_text() == "39\n"  # left as it was


def test_a_garbled_pidfile_is_not_up(tmp_path: Path) -> None:
    node = _node(tmp_path)
    (node.ovs_rundir / "ovs-vswitchd.pid").write_text("")
    assert node.vswitchd_ctl() is None
