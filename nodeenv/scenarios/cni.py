"""PrismNET CNI in the sandbox: pods in two namespaces created through the installed `prismnet`
executable (driven the way containerd drives a conflist), pinging each other and the node."""

from __future__ import annotations

import subprocess
import time

from nodeenv.cni_component import CniRuntime, installed_runtime
from nodeenv.daemons import run_checked
from nodeenv.scenario import Scenario

PODS = (("sbx-cni-a1", "sandbox-a"), ("sbx-cni-a2", "sandbox-a"), ("sbx-cni-b1", "sandbox-b"))


def run(scn: Scenario) -> None:
    env = scn.node.endpoints
    rt = installed_runtime(env)  # as kubelet does: nothing but the installed conflist
    results: dict[str, dict[str, object]] = {}
    with scn.step("cni: ADD 3 pods in 2 namespaces via prismnet"):
        for name, ns in PODS:
            _add(scn, rt, name, ns, results)
    with scn.step("cni: CHECK every pod"):
        for name, ns in PODS:
            call = rt.check(_cid(name), f"/run/netns/{name}", results[name], args=_args(name, ns))
            if call.rc:
                raise RuntimeError(f"CHECK {name}: {call.out}")
    with scn.step("cni: pods ping each other (same and other namespace)"):
        _ping(PODS[0][0], _ip(results[PODS[1][0]]))
        _ping(PODS[0][0], _ip(results[PODS[2][0]]))
        _ping(PODS[2][0], _ip(results[PODS[1][0]]))
    with scn.step("cni: node pings pods, pods ping the node"):
        for name, _ in PODS:
            _ping(None, _ip(results[name]))
        node_ip = _node_address(env)
        _ping(PODS[2][0], node_ip)
    with scn.step("cni: DEL removes the pods' ports"):
        _delete_all(rt, results, env)


def _delete_all(rt: CniRuntime, results: dict[str, dict[str, object]], env: dict[str, str]) -> None:
    for name, ns in PODS:
        call = rt.delete(_cid(name), f"/run/netns/{name}", results.pop(name), args=_args(name, ns))
        if call.rc:
            raise RuntimeError(f"DEL {name}: {call.out}")
    nbctl = [
        "ovn-nbctl",
        f"--db={env['OVN_NB_DB']}",
        "--bare",
        "--columns=name",
        "list",
        "Logical_Switch_Port",
    ]
    left = [p for p in run_checked(nbctl).split() if "sbx-cni" in p]
    if left:
        raise RuntimeError(f"ports left behind: {left}")


def _cid(name: str) -> str:
    return f"{name.replace('-', '')}{'0' * 24}"


def _args(name: str, ns: str) -> str:
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name}"


def _add(scn: Scenario, rt: CniRuntime, name: str, ns: str, results: dict[str, dict[str, object]]) -> None:
    run_checked(["ip", "netns", "add", name])
    scn.defer(lambda: subprocess.run(["ip", "netns", "del", name], check=False))

    def delete() -> None:
        if name in results:
            rt.delete(_cid(name), f"/run/netns/{name}", results.pop(name), args=_args(name, ns))

    scn.defer(delete)
    call = rt.add(_cid(name), f"/run/netns/{name}", args=_args(name, ns))
    if call.rc:
        raise RuntimeError(f"ADD {name}: {call.out} {call.stderr}")
    results[name] = call.out


def _ip(result: dict[str, object]) -> str:
    return str(result["ips"][0]["address"]).split("/")[0]  # type: ignore[index]


def _node_address(env: dict[str, str]) -> str:
    """The node's address on the pod network (its management port)."""
    from cni.settings import AgentSettings

    ifname = AgentSettings(bridge=env["OVS_BRIDGE"]).management_if
    out = run_checked(["ip", "-4", "-o", "addr", "show", "dev", ifname]).split()
    return out[out.index("inet") + 1].split("/")[0]


def _ping(netns: str | None, ip: str) -> None:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    deadline = time.monotonic() + 5
    while True:
        proc = subprocess.run([*prefix, "ping", "-c1", "-W1", ip], capture_output=True, text=True)
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{netns or 'node'} cannot ping {ip}")
