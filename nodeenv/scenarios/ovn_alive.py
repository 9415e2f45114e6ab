"""Proof that OVN is alive: a logical switch, two ports bound by ovn-controller, two
network namespaces that ping each other through it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from nodeenv.daemons import run_checked, wait_for
from nodeenv.scenario import Scenario

SWITCH = "sandbox-ovn"
PODS = (
    ("sbx-ovn-a", "sbxovna", "0a:58:0a:fe:00:0a", "10.254.0.10"),
    ("sbx-ovn-b", "sbxovnb", "0a:58:0a:fe:00:0b", "10.254.0.11"),
)


def run(scn: Scenario) -> None:
    env = scn.node.process_env()
    nbctl = ["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--timeout=10"]
    vsctl = ["ovs-vsctl", f"--db={env['OVS_DB']}", "--timeout=10"]
    with scn.step("ovn: logical switch with two ports"):
        scn.defer(lambda: run_checked([*nbctl, "--if-exists", "ls-del", SWITCH], env))
        cmd = [*nbctl, "ls-add", SWITCH]
        for ns, _, mac, ip in PODS:
            cmd += ["--", "lsp-add", SWITCH, ns, "--", "lsp-set-addresses", ns, f"{mac} {ip}"]
        run_checked(cmd, env)
    with scn.step("ovn: two netns bound by ovn-controller"):
        for ns, host_if, mac, ip in PODS:
            _plug(scn, vsctl, env, ns, host_if, mac, ip)
        for _, host_if, _, _ in PODS:
            wait_for(_installed(vsctl, env, host_if), f"ovn-installed on {host_if}", timeout=10)
    with scn.step("ovn: netns ping each other"):
        _ping(PODS[0][0], PODS[1][3])
        _ping(PODS[1][0], PODS[0][3])


def _installed(vsctl: list[str], env: dict[str, str], host_if: str) -> Callable[[], bool]:
    get = [*vsctl, "--if-exists", "get", "Interface", host_if, "external_ids:ovn-installed"]
    return lambda: "true" in run_checked(get, env)


def _plug(
    scn: Scenario, vsctl: list[str], env: dict[str, str], ns: str, host_if: str, mac: str, ip: str
) -> None:
    run_checked(["ip", "netns", "add", ns])
    scn.defer(lambda: subprocess.run(["ip", "netns", "del", ns], check=False))
    run_checked(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns])
    scn.defer(lambda: subprocess.run(["ip", "link", "del", host_if], check=False, capture_output=True))
    for argv in (
        ["ip", "-n", ns, "link", "set", "eth0", "address", mac],
        ["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        ["ip", "link", "set", host_if, "up"],
        # TCP through the userspace datapath stalls with TX checksum offload on.
        ["ethtool", "-K", host_if, "tx", "off"],
        ["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off"],
    ):
        run_checked(argv)
    scn.defer(lambda: run_checked([*vsctl, "--if-exists", "del-port", host_if], env))
    run_checked(
        [
            *vsctl,
            "add-port",
            env["OVS_BRIDGE"],
            host_if,
            "--",
            "set",
            "Interface",
            host_if,
            f"external_ids:iface-id={ns}",
        ],
        env,
    )


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
