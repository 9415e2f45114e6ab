"""The NB lost and rebuilt (cluster only; after every earlier part's cleanup, docs/nb-rebuild.md):
two namespaces, pods on three nodes in the API, nbr-b open to its own namespace only, a LoadBalancer
Service. The central's NB (standalone here) stopped, its file replaced by an empty database and
started again (nodeenv/cluster/db_wipe.py); the suite writes it all back from the API and the nodes'
own state. After: the same switches (subnets), ports (addresses, enabled), load balancers (VIPs),
as many ACLs and port groups; b2 reaches b1 across nodes, directly and through the LoadBalancer IP;
a1 is still refused. Then the SB lost the same way: northd and every ovn-controller write it again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from nodeenv.cluster import db_wipe
from nodeenv.cluster.invariants import _as_list, rows
from nodeenv.daemons import run_checked
from nodeenv.node import read_env_file
from nodeenv.scenario import Scenario
from nodeenv.scenarios.tenancy import _apply, _deleter, _pod, _reaches

A, B = "nbr-a", "nbr-b"
PODS = ((A, "a1"), (B, "b1"), (B, "b2"))
PORT = 8080
NB_READ = {
    "Load_Balancer": ["name", "vips"],
    "Port_Group": ["name"],
    "ACL": ["match"],
}


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None or len(cluster.nodes) < 3:
        return
    with scn.step("cleanup: every earlier part's pods, Services and volumes removed", on="all"):
        if errors := scn.run_cleanups():
            raise RuntimeError("; ".join(errors))
    kubectl = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=10s"]
    places = [scn.at(i) for i in range(len(PODS))]
    with scn.step("nb rebuild: 3 pods in the API, a same-namespace policy, a LoadBalancer",
                  on=scn.where(*places)) as step:  # fmt: skip
        for ns in (A, B):
            _apply(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            scn.defer(_deleter(kubectl, ns))
        pods = zip(PODS, places, strict=True)
        ips = {name: _pod(scn, kubectl, place.env, ns, name) for (ns, name), place in pods}
        for obj in _policy_and_service(ips["b1"]):
            _apply(kubectl, obj)
        lb_ip = _until(lambda: _lb_ip(kubectl), bool, "no LoadBalancer IP for nbr-b/web")
        _until(lambda: _paths(ips, lb_ip), _as_expected, "b2 -> b1 (direct, LB) open and a1 -> b1 refused")
        step.detail = f"b1 {ips['b1']} on {places[1].name}, LoadBalancer {lb_ip}"
    nb, sb = (read_env_file(cluster.env_file)[k] for k in ("OVN_NB_DB", "OVN_SB_DB"))
    before = _nb_state(nb)
    with scn.step("nb rebuild: the NB wiped and created empty; the suite writes it back", on="all") as step:
        wiped_at = db_wipe.wipe(cluster, "nb")
        after = _until(lambda: _nb_state(nb), lambda s: not _difference(before, s), "the NB as before",
                       timeout=60, show=lambda s: _difference(before, s))  # fmt: skip
        in_nb = time.monotonic() - wiped_at
        paths = _until(lambda: _paths(ips, lb_ip), _as_expected, "the same paths after the rebuild")
        back = time.monotonic() - wiped_at
        step.detail = (f"NB as before in {in_nb:.1f} s ({_counts(after)}; {before['empty switches']} "
                       "switches of namespaces without pods left to their next ADD); b2 -> b1 and the LB "
                       f"again, a1 -> b1 refused: {back:.1f} s after the wipe ({paths})")  # fmt: skip
    with scn.step("nb rebuild: the SB wiped; northd and the chassis write it back", on="all") as step:
        chassis = _sb_chassis(sb)
        wiped_at = db_wipe.wipe(cluster, "sb")
        _until(lambda: _sb_chassis(sb), lambda c: c == chassis, "every chassis registered again", timeout=60)
        in_sb = time.monotonic() - wiped_at
        _until(lambda: _paths(ips, lb_ip), _as_expected, "the same paths after the SB rebuild", timeout=60)
        step.detail = (f"{len(chassis)} chassis again in {in_sb:.1f} s, the same paths "
                       f"{time.monotonic() - wiped_at:.1f} s after the wipe")  # fmt: skip


def _policy_and_service(b1: str) -> list[dict[str, Any]]:
    http = {"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}
    return [
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "same-namespace", "namespace": B},
         "spec": {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": B},
         "spec": {"type": "LoadBalancer", "selector": {"app": "b1"}, "ports": [http]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "web-sbx", "namespace": B, "labels": {"kubernetes.io/service-name": "web"}},
         "endpoints": [{"addresses": [b1], "conditions": {"ready": True}}],
         "ports": [{"name": "http", "port": PORT, "protocol": "TCP"}]},
    ]  # fmt: skip


def _lb_ip(kubectl: list[str]) -> str:
    path = "jsonpath={.status.loadBalancer.ingress[0].ip}"
    return run_checked([*kubectl, "-n", B, "get", "service", "web", "-o", path]).strip()


def _paths(ips: dict[str, str], lb_ip: str) -> dict[str, bool]:
    return {
        "b2->b1": _reaches("nbr-b-b2", ips["b1"], PORT),
        "b2->lb": _reaches("nbr-b-b2", lb_ip, PORT),
        "a1->b1": _reaches("nbr-a-a1", ips["b1"], PORT),
    }


def _as_expected(paths: dict[str, bool]) -> bool:
    return paths["b2->b1"] and paths["b2->lb"] and not paths["a1->b1"]


def _nb_state(nb: str) -> dict[str, Any]:
    """What the suite wrote into the NB, comparable across a rebuild (no UUIDs): the switches that
    have a port besides their router port, with their subnets, and those ports with their addresses;
    load balancers with their VIPs, port groups by name, ACLs by count. A namespace switch no pod is
    on any more is not written again (the next ADD in its namespace creates it): counted apart."""
    switches = rows("ovn-nbctl", nb, "Logical_Switch", ["name", "other_config", "ports"])
    ports = {str(p.pop("_uuid")): p for p in rows("ovn-nbctl", nb, "Logical_Switch_Port",
                                                    ["_uuid", "name", "addresses", "enabled"])}  # fmt: skip
    used, empty = [], 0
    for sw in switches:
        own = [ports[str(u)] for u in _as_list(sw.pop("ports")) if str(u) in ports]
        if any(p["addresses"] != "router" for p in own):
            used += [sw, *own]
        else:
            empty += 1
    got = {t: rows("ovn-nbctl", nb, t, cols) for t, cols in NB_READ.items()}
    return {
        "in use": sorted(json.dumps(r, sort_keys=True) for r in used),
        "empty switches": empty,
        **{
            t: sorted(json.dumps(r, sort_keys=True) for r in v) if t != "ACL" else len(v)
            for t, v in got.items()
        },
    }


def _counts(state: dict[str, Any]) -> str:
    n = {t: v if isinstance(v, int) else len(v) for t, v in state.items()}
    return (f"{n['in use']} switches and ports in use, {n['Load_Balancer']} LBs, {n['Port_Group']} port "
            f"groups, {n['ACL']} ACLs")  # fmt: skip


def _difference(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What differs, by table: (rows only before, rows only after), or (count before, count after)."""
    out: dict[str, Any] = {}
    for t in (t for t in before if t != "empty switches"):
        b, a = before[t], after[t]
        if isinstance(b, int):
            out.update({t: (b, a)} if a != b else {})
        elif a != b:
            out[t] = (sorted(set(b) - set(a)), sorted(set(a) - set(b)))
    return out


def _sb_chassis(sb: str) -> list[str]:
    return sorted(str(c["name"]) for c in rows("ovn-sbctl", sb, "Chassis", ["name"]))


def _until(
    fn: Callable[[], Any], ok: Callable[[Any], bool], what: str, timeout: float = 20.0,
    show: Callable[[Any], Any] = repr,
) -> Any:  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
        except Exception as e:  # a database restarting, a tool timing out
            value = e
        if not isinstance(value, Exception) and ok(value):
            return value
        if time.monotonic() > deadline:
            last = value if isinstance(value, Exception) else show(value)
            raise RuntimeError(f"timed out waiting for {what} (last: {last})")
        time.sleep(0.2)
