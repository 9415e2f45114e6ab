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
import subprocess
import sys
from pathlib import Path
from typing import Any

from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios.tenancy import _apply, _deleter, _eventually, _get, _pod, _reaches

NS, PEER_NS = "verdict-a", "verdict-b"
ANNOTATION = {"plasmacloud.io/acl-logging": json.dumps({"deny": "alert", "allow": "notice"})}
SCRAPE = """
import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
"""


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
        found: list[dict[str, Any]] = []

        def logged() -> bool:
            _reaches(f"{PEER_NS}-client", web, 8080)  # another drop: the meter may have let the first pass
            found[:] = [v for p in (web_at, client_at) for v in _verdicts(p) if v.get("dst") == web]
            return bool(found)

        _eventually(logged, "the agent's JSON line for the drop", timeout=20)
        v = found[-1]
        if (v["namespace"], v["verdict"], v["dport"]) != (NS, "drop", 8080):
            raise RuntimeError(f"unexpected verdict line: {v}")
        count = max(_counter(p, v["acl"]) for p in (web_at, client_at))
        if count < 1:
            raise RuntimeError(f"prismnet_policy_verdicts_total has no drop of {v['acl']}")
        r.detail = (f"{v['namespace']} {v['policy']} {v['verdict']} {v['direction']} {v['protocol']} "
                    f"{v['src']}:{v['sport']} -> {v['dst']}:{v['dport']}; counter {count:.0f}")  # fmt: skip
    if any(p.env.get("PRISMNET_EVENTS_KUBECONFIG") for p in (web_at, client_at)):
        with scn.step("verdict log: the tenant sees the drop as an Event in its namespace") as r:
            found_events: list[dict[str, Any]] = []

            def listed() -> bool:
                found_events[:] = [
                    e for e in _get(kubectl, "events", NS) if e.get("reason") == "PolicyDenied"
                ]
                return bool(found_events)

            _eventually(listed, f"a PolicyDenied Event in {NS}", timeout=20)
            e = found_events[0]
            r.detail = f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}: {e['message'][:90]}"


def _verdicts(place: Place) -> list[dict[str, Any]]:
    """prismnet-agent's JSON verdict lines on `place`."""
    log = Path(place.env["K8SHOST_RUN_DIR"]) / "prismnet" / "agent.log"
    if not log.exists():
        return []
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if '"logger":"prismnet.verdict"' in ln]
    return [d for d in map(json.loads, lines) if d.get("msg") == "policy verdict"]


def _counter(place: Place, acl: str) -> float:
    url = place.env.get("PRISMNET_METRICS", "")
    if not url:
        return 0.0
    argv = place.argv([sys.executable, "-c", SCRAPE, url])
    text = subprocess.run(argv, capture_output=True, text=True, timeout=15).stdout
    want = f'prismnet_policy_verdicts_total{{namespace="{NS}",policy="{acl}",verdict="drop"}}'
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(want))
