"""PrismNET CNI in the sandbox: pods in two namespaces created through the installed `prismnet`
executable (driven the way containerd drives a conflist), pinging each other and the node. On a
cluster each pod is on another node (its node's installed plugin, run in that node's namespace)."""

from __future__ import annotations

import subprocess
import time

from nodeenv.cni_component import CniRuntime, installed_runtime
from nodeenv.daemons import run_checked
from nodeenv.scenario import Place, Scenario

PODS = (("sbx-cni-a1", "sandbox-a"), ("sbx-cni-a2", "sandbox-a"), ("sbx-cni-b1", "sandbox-b"))


def run(scn: Scenario) -> None:
    places = {name: scn.at(i) for i, (name, _) in enumerate(PODS)}
    runtimes = {name: installed_runtime(p.env) for name, p in places.items()}  # as kubelet: the conflist
    results: dict[str, dict[str, object]] = {}
    on = scn.where(*places.values())
    with scn.step("cni: ADD 3 pods in 2 namespaces via prismnet", on=on):
        for name, ns in PODS:
            _add(scn, runtimes[name], name, ns, results)
    with scn.step("cni: CHECK every pod", on=on):
        for name, ns in PODS:
            call = runtimes[name].check(_cid(name), f"/run/netns/{name}", results[name], args=_args(name, ns))
            if call.rc:
                raise RuntimeError(f"CHECK {name}: {call.out}")
    with scn.step("cni: pods ping each other (same and other namespace)", on=on):
        _ping(PODS[0][0], _ip(results[PODS[1][0]]))
        _ping(PODS[0][0], _ip(results[PODS[2][0]]))
        _ping(PODS[2][0], _ip(results[PODS[1][0]]))
    with scn.step("cni: node pings pods, pods ping the node", on=on):
        for place in {p.name: p for p in places.values()}.values():  # every node pings every pod
            for name, _ in PODS:
                _ping(None, _ip(results[name]), place)
        for name, _ in PODS:  # every pod pings its own node
            _ping(name, _node_address(places[name]))
    with scn.step("cni: DEL removes the pods' ports", on=on):
        for name, ns in PODS:
            call = runtimes[name].delete(
                _cid(name), f"/run/netns/{name}", results.pop(name), args=_args(name, ns)
            )
            if call.rc:
                raise RuntimeError(f"DEL {name}: {call.out}")
        _no_ports_left(scn.env)


def _no_ports_left(env: dict[str, str]) -> None:
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


def _node_address(place: Place) -> str:
    """The node's address on the pod network (its management port)."""
    from cni.settings import AgentSettings

    ifname = AgentSettings(bridge=place.env["OVS_BRIDGE"]).management_if
    out = run_checked(place.argv(["ip", "-4", "-o", "addr", "show", "dev", ifname])).split()
    return out[out.index("inet") + 1].split("/")[0]


def _ping(netns: str | None, ip: str, node: Place | None = None) -> None:
    """Ping from the pod `netns`, or (None) from `node` (this namespace when no node is given)."""
    argv = ["ping", "-c1", "-W1", ip]
    argv = ["ip", "netns", "exec", netns, *argv] if netns else node.argv(argv) if node else argv
    deadline = time.monotonic() + 5
    while True:
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{netns or (node.name if node else 'node')} cannot ping {ip}")
