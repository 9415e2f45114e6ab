"""Proof that OVN is alive: a logical switch, two ports bound by ovn-controller, two
network namespaces that ping each other through it. On a cluster the two ports are on two nodes
(bound by each node's ovn-controller, plugged into each node's br-int), so the ping crosses Geneve."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from nodeenv.daemons import run_checked, wait_for
from nodeenv.scenario import Place, Scenario

SWITCH = "sandbox-ovn"
PODS = (
    ("sbx-ovn-a", "sbxovna", "0a:58:0a:fe:00:0a", "10.254.0.10"),
    ("sbx-ovn-b", "sbxovnb", "0a:58:0a:fe:00:0b", "10.254.0.11"),
)


def run(scn: Scenario) -> None:
    env = scn.node.process_env()
    nbctl = ["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--timeout=10"]
    places = [scn.at(i) for i in range(len(PODS))]
    with scn.step("ovn: logical switch with two ports"):
        scn.defer(lambda: run_checked([*nbctl, "--if-exists", "ls-del", SWITCH], env))
        cmd = [*nbctl, "ls-add", SWITCH]
        for ns, _, mac, ip in PODS:
            cmd += ["--", "lsp-add", SWITCH, ns, "--", "lsp-set-addresses", ns, f"{mac} {ip}"]
        run_checked(cmd, env)
    with scn.step("ovn: two netns bound by ovn-controller", on=scn.where(*places)):
        for (ns, host_if, mac, ip), place in zip(PODS, places, strict=True):
            _plug(scn, place, ns, host_if, mac, ip)
        for (_, host_if, _, _), place in zip(PODS, places, strict=True):
            wait_for(_installed(place, host_if), f"ovn-installed on {host_if} ({place.name})", timeout=10)
    with scn.step("ovn: netns ping each other", on=scn.where(*places)):
        _ping(PODS[0][0], PODS[1][3])
        _ping(PODS[1][0], PODS[0][3])


def _vsctl(place: Place) -> list[str]:
    return ["ovs-vsctl", f"--db={place.env['OVS_DB']}", "--timeout=10"]


def _installed(place: Place, host_if: str) -> Callable[[], bool]:
    get = [*_vsctl(place), "--if-exists", "get", "Interface", host_if, "external_ids:ovn-installed"]
    return lambda: "true" in run_checked(get)


def _plug(scn: Scenario, place: Place, ns: str, host_if: str, mac: str, ip: str) -> None:
    """The netns's veth, its host end in the node's namespace, plugged into the node's br-int."""
    run_checked(["ip", "netns", "add", ns])
    scn.defer(lambda: subprocess.run(["ip", "netns", "del", ns], check=False))
    host = place.argv(["ip", "link"])
    run_checked([*host, "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns])
    scn.defer(lambda: subprocess.run([*host, "del", host_if], check=False, capture_output=True))
    for argv in (
        ["ip", "-n", ns, "link", "set", "eth0", "address", mac],
        ["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        [*host, "set", host_if, "up"],
        # TCP through the userspace datapath stalls with TX checksum offload on.
        place.argv(["ethtool", "-K", host_if, "tx", "off"]),
        ["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off"],
    ):
        run_checked(argv)
    vsctl = _vsctl(place)
    scn.defer(lambda: run_checked([*vsctl, "--if-exists", "del-port", host_if]))
    bridge = place.env["OVS_BRIDGE"]
    run_checked([*vsctl, "add-port", bridge, host_if, "--", "set", "Interface", host_if,
                 f"external_ids:iface-id={ns}"])  # fmt: skip


def _ping(ns: str, ip: str) -> None:
    deadline = time.monotonic() + 5
    while True:
        proc = subprocess.run(
            ["ip", "netns", "exec", ns, "ping", "-c1", "-W1", ip], capture_output=True, text=True
        )
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{ns} cannot ping {ip}: {proc.stdout.strip().splitlines()[-1:]}")
