"""Policy verdict logs in the sandbox: a namespace annotated `plasmacloud.io/acl-logging` (deny at
severity alert), a policy isolating its web pod, a pod of another namespace refused, and the drop
showing up as prismnet-agent's JSON line (logger prismnet.verdict) and in its counter
prismnet_policy_verdicts_total on the node where the ACL judged the packet (README "Policy verdict
logs"), and, when the agents have a kubeconfig (the sandbox's do), as a PolicyDenied Event in the
namespace, which is how its tenant sees it (`kubectl get events`). On a cluster the two pods are on
two nodes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import metric_catalogue as cat
from nodeenv.metrics_scrape import Target, value
from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios.tenancy import _apply, _deleter, _eventually, _get, _pod, _reaches

NS, PEER_NS = "verdict-a", "verdict-b"
ANNOTATION = {"plasmacloud.io/acl-logging": json.dumps({"deny": "alert", "allow": "notice"})}


def run(scn: Scenario) -> None:
    kubectl = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=10s"]
    web_at, client_at = scn.at(0), scn.at(1)
    with scn.step("verdict log: an annotated namespace, a policy, pods", on=scn.where(web_at, client_at)):
        for ns, annotations in ((NS, ANNOTATION), (PEER_NS, {})):
            _apply(kubectl, {"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns, "annotations": annotations}})  # fmt: skip
            scn.defer(_deleter(kubectl, ns))
        rule = {"from": [{"podSelector": {}}], "ports": [{"port": 8080}]}
        spec = {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [rule]}
        _apply(kubectl, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                         "metadata": {"name": "web-in", "namespace": NS}, "spec": spec})  # fmt: skip
        web = _pod(scn, kubectl, web_at.env, NS, "web")
        _pod(scn, kubectl, client_at.env, PEER_NS, "client")
    with scn.step("verdict log: a drop as a JSON line and a counter", on=scn.where(web_at, client_at)) as r:
        _eventually(lambda: not _reaches(f"{PEER_NS}-client", web, 8080), f"{PEER_NS}/client -> web refused")
        v, count = logged_drop((web_at, client_at), lambda: _reaches(f"{PEER_NS}-client", web, 8080),
                               lambda v: v.get("dst") == web)  # fmt: skip
        if (v["namespace"], v["verdict"], v["dport"]) != (NS, "drop", 8080):
            raise RuntimeError(f"unexpected verdict line: {v}")
        r.detail = f"{summary(v)}; counter {count:.0f}"
    if any(p.env.get("PRISMNET_EVENTS_KUBECONFIG") for p in (web_at, client_at)):
        with scn.step("verdict log: the tenant sees the drop as an Event in its namespace") as r:
            r.detail = policy_denied(kubectl, NS)


def summary(v: dict[str, Any]) -> str:
    """A verdict line as the step's detail: namespace, policy, verdict, direction, 5-tuple."""
    return (f"{v['namespace']} {v['acl'] or v['policy']} {v['verdict']} {v['direction']} {v['protocol']} "
            f"{v['src']}:{v['sport']} -> {v['dst']}:{v['dport']}")  # fmt: skip


def logged_drop(
    places: Sequence[Place], probe: Callable[[], object], match: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any], float]:
    """The agent's JSON line of a drop `match` picks on any of `places` (probing again until it shows:
    the meter may have let the first one pass unlogged), and its counter there (at least 1)."""
    found: list[dict[str, Any]] = []

    def logged() -> bool:
        probe()
        found[:] = [v for p in places for v in _verdicts(p) if v.get("verdict") == "drop" and match(v)]
        return bool(found)

    _eventually(logged, "the agent's JSON line for the drop", timeout=20)
    v = found[-1]
    count = max(_counter(p, v["namespace"], v["acl"]) for p in places)
    if count < 1:
        raise RuntimeError(f"prismnet_policy_verdicts_total has no drop of {v['acl']} in {v['namespace']}")
    return v, count


def policy_denied(kubectl: list[str], ns: str) -> str:
    """The first PolicyDenied Event in `ns`, as `kubectl get events -n ns` shows it to whoever
    `kubectl` is (the tenant), as the step's detail."""
    found: list[dict[str, Any]] = []

    def listed() -> bool:
        found[:] = [e for e in _get(kubectl, "events", ns) if e.get("reason") == "PolicyDenied"]
        return bool(found)

    _eventually(listed, f"a PolicyDenied Event in {ns}", timeout=20)
    e = found[0]
    return f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}: {e['message'][:110]}"


def _verdicts(place: Place) -> list[dict[str, Any]]:
    """prismnet-agent's JSON verdict lines on `place`."""
    log = Path(place.env["K8SHOST_RUN_DIR"]) / "prismnet" / "agent.log"
    if not log.exists():
        return []
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if '"logger":"prismnet.verdict"' in ln]
    return [d for d in map(json.loads, lines) if d.get("msg") == "policy verdict"]


def _counter(place: Place, namespace: str, acl: str) -> float:
    url = place.env.get("PRISMNET_METRICS", "")
    if not url:
        return 0.0
    text = Target(cat.AGENT, place.name, place.netns, url).scrape()
    got = value(text, "prismnet_policy_verdicts_total", namespace=namespace, policy=acl, verdict="drop")
    return got or 0.0
