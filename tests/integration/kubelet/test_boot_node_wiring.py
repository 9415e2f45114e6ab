"""prismnet-agent on `make boot` reaches what ovs-node's ovn-controller leaves on the node (the
daemonsets/ manifests: /run/ovn and /var/log/ovn hostPaths, the agent's own ServiceAccount allowed
to write Events). On the package's shared boot (conftest.py), the last of its modules: it kills
ovn-controller on node2 (the container's restart brings it back, which the test waits for).

- each node's agent serves `prismnet_ovn_controller_up 1` (it probes ovn-controller's control
  socket); ovn-controller killed on node2 (its process, by PID) turns node2's to 0 while the other
  nodes stay 1, and the restarted container brings it back to 1 (OvnControllerDown fires and
  resolves on a k3s install);
- a default-deny NetworkPolicy in a namespace annotated `plasmacloud.io/acl-logging` and a refused
  probe between two of its pods on two nodes: a JSON verdict line in the agent's `kubectl logs`,
  prismnet_policy_verdicts_total for that namespace, and a PolicyDenied Event in the namespace
  (`kubectl get events -n`), which is what its tenant sees."""

from __future__ import annotations

import functools
import json
import os
import signal
from typing import Any

from nodeenv.daemons import http_get_in
from nodeenv.image.build import image_name
from nodeenv.image.store import PodmanError
from nodeenv.metrics_scrape import value
from tests.integration.kubelet.boot_session import PREFIX, Booted
from tests.integration.kubelet.conftest import wait_for
from tests.integration.kubelet.test_boot_nodes import _store, container

NODES = {"node1": "10.250.0.11", "node2": "10.250.0.12", "node3": "10.250.0.13"}
UP = "prismnet_ovn_controller_up"
NS = "nw-verdicts"
POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}, labels: {{app: {name}}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  containers:
    - name: web
      image: {image}
      command: [python3, -m, http.server, "8080"]
      ports: [{{containerPort: 8080}}]
"""
DENY_ALL = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny", "namespace": NS},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}  # fmt: skip
GET = "import urllib.request, sys; print(urllib.request.urlopen(sys.argv[1], timeout=2).status)"


def metrics(node: str) -> str:
    status, body = http_get_in(f"{PREFIX}-{node}", f"http://{NODES[node]}:9465/metrics", timeout=10)
    assert status == 200, (node, status, body[:300])
    return body


def up(node: str) -> float | None:
    return value(metrics(node), UP)


def is_up(node: str) -> bool:
    return up(node) == 1.0


def pod_on(booted: Booted, app: str, node: str) -> str:
    items = booted.get("-n", "kube-system", "pods", "-l", f"app.kubernetes.io/name={app}")["items"]
    return str(next(p["metadata"]["name"] for p in items if p["spec"].get("nodeName") == node))


def test_each_nodes_agent_reports_its_ovn_controller_up(booted: Booted) -> None:
    for node in NODES:
        wait_for(functools.partial(is_up, node), 60, f"{UP} 1 on {node}", lambda: f"{UP} = {up(node)}")  # noqa: B023


def test_ovn_controller_killed_on_a_node_turns_its_metric_to_0_until_restarted(booted: Booted) -> None:
    ctr = container(pod_on(booted, "ovs-node", "node2"), "ovn-controller")
    pid = int(_store()("inspect", "--format", "{{.State.Pid}}", ctr))  # ovn-controller: the shell exec'd it
    assert os.readlink(f"/proc/{pid}/exe").endswith("ovn-controller"), os.readlink(f"/proc/{pid}/exe")
    assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{PREFIX}-node2").st_ino, (
        "not node2's"
    )
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: up("node2") == 0.0, 30, f"{UP} 0 on node2", lambda: f"{UP} = {up('node2')}")
    assert (up("node1"), up("node3")) == (1.0, 1.0)
    wait_for(lambda: up("node2") == 1.0, 180, f"{UP} 1 again on node2 (container restarted)")


def _verdict_lines(booted: Booted, node: str) -> list[dict[str, Any]]:
    logs = booted.kubectl("logs", "-n", "kube-system", pod_on(booted, "prismnet-agent", node), "-c",
                          "prismnet-agent")  # fmt: skip
    lines = [ln for ln in logs.splitlines() if '"logger":"prismnet.verdict"' in ln]
    return [d for d in map(json.loads, lines) if d.get("msg") == "policy verdict"]


def test_a_denied_probe_is_a_verdict_line_a_counter_and_a_policy_denied_event(booted: Booted) -> None:
    annotation = json.dumps({"deny": "alert"})
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": NS, "annotations": {"plasmacloud.io/acl-logging": annotation}}}  # fmt: skip
    booted.kubectl("apply", "-f", "-", stdin=json.dumps(ns))
    booted.kubectl("apply", "-f", "-", stdin=json.dumps(DENY_ALL))
    docs = [POD.format(name=n, ns=NS, node=node, image=image_name()) for n, node in
            (("web", "node1"), ("client", "node2"))]  # fmt: skip
    booted.kubectl("apply", "-f", "-", stdin="---\n".join(docs))

    def running() -> dict[str, Any]:
        items = booted.get("-n", NS, "pods")["items"]
        ok = {p["metadata"]["name"]: p for p in items if p.get("status", {}).get("phase") == "Running"
              and p["status"].get("podIP")}  # fmt: skip
        return ok if len(ok) == 2 else {}

    web_ip = wait_for(running, 90, "web and client Running")["web"]["status"]["podIP"]
    client = container("client", "web")
    found: list[tuple[str, dict[str, Any]]] = []

    def logged() -> bool:
        try:
            reached = _store()("exec", client, "python3", "-c", GET, f"http://{web_ip}:8080/")
        except PodmanError:
            reached = ""
        assert not reached, f"client reached web through the default deny: {reached}"
        found[:] = [(n, v) for n in ("node1", "node2") for v in _verdict_lines(booted, n)
                    if v.get("namespace") == NS and v.get("dst") == web_ip]  # fmt: skip
        return bool(found)

    wait_for(logged, 60, f"a verdict line for {NS} in the agents' kubectl logs")
    node, v = found[-1]
    assert (v["verdict"], v["dport"], v["protocol"]) == ("drop", 8080, "tcp"), v
    count = value(metrics(node), "prismnet_policy_verdicts_total", namespace=NS, verdict="drop")
    assert count is not None and count >= 1, count

    def denied() -> list[dict[str, Any]]:
        return [e for e in booted.get("-n", NS, "events")["items"] if e.get("reason") == "PolicyDenied"]

    (event, *_) = wait_for(denied, 30, f"a PolicyDenied Event in {NS}")
    assert event["type"] == "Warning" and web_ip in event["message"], event
    booted.kubectl("delete", "namespace", NS, "--wait=false")
