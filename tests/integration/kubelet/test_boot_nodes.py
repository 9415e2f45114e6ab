"""`make boot NODES=3` (`python -m nodeenv.kubelet boot --nodes 3`): the whole k3s overlay booted on
three nodes, each a network namespace on an underlay with its own runner, as an HA k3s has three
servers. The boot the package's boot modules share (conftest.py `booted`, ~50 s here when the
machine is idle), removed with `down` after the last of them.

- every pod of the overlay is scheduled (none Pending): a DaemonSet's pod per node, every
  Deployment's two replicas on two nodes (required anti-affinity), ovn-central-0/1/2 on three;
  every pod whose containers are all booted is Ready through its own probes; hostNetwork pods have
  their node's underlay address; the summary counts Ready per node;
- ovn-central's three members form one NB and one SB RAFT cluster by the manifest's own scripts
  (3 servers, one leader all agree on) and serve the three nodes' ovn-controllers (3 chassis, each
  encapsulating from its node's address);
- each controller Deployment has one leader (its Lease held by one of its pods);
- a pod on node1 and a pod on node2 (placed by the scheduler through nodeSelector) reach each other
  through the booted PrismNET: ICMP, and HTTP from inside the containers;
- a new namespace's first pod, on a node with no cluster DNS replica, has its first DNS query
  answered by the cluster DNS Service.

Nothing of it lives in the machine's own namespace (the nodes' OVS are in their namespaces); its
prefix is the shared boot's (k8shkt)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from nodeenv.daemons import http_get_in
from nodeenv.image.build import image_name
from nodeenv.image.store import ImageStore
from nodeenv.metrics_scrape import promtool_problems, value
from tests.integration.kubelet.boot_session import PREFIX, Booted, cli
from tests.integration.kubelet.conftest import wait_for
from tests.integration.kubelet.test_boot_cli import OURS_READY, rows

NODES = {"node1": "10.250.0.11", "node2": "10.250.0.12", "node3": "10.250.0.13"}
DEPLOYMENTS = ("fiberlb-controller", "netpol-controller", "node-controller", "flashdns-controller",
               "project-controller", "lightningstor-csi-controller")  # fmt: skip
DAEMONSETS = ("ovs-node", "prismnet-agent", "iam-webhook", "lightningstor-csi-node")
LEADERS = ("fiberlb-controller", "netpol-controller", "node-controller", "project-controller")


def _store() -> ImageStore:
    return ImageStore.from_env(os.environ)  # the store boot ran the pods in (K8SHOST_IMAGE_STORE too)


def container(pod: str, name: str) -> str:
    names = _store()("ps", "--format", "{{.Names}}").split()
    return next(n for n in names if n.startswith(f"k8s_{name}_{pod}_"))


def test_every_pod_is_scheduled_on_the_nodes_and_ready(booted: Booted) -> None:
    pods = rows(booted.out)
    by_node: dict[str, list[str]] = {}
    for name, cols in pods.items():
        assert cols[7] in NODES, f"{name} not scheduled:\n{booted.out}"
        by_node.setdefault(cols[7], []).append(name)
    for app in OURS_READY:  # every container ours: Running and all ready
        for cols in (c for n, c in pods.items() if n.startswith(app + "-")):
            assert cols[3] == "Running" and len(set(cols[2].split("/"))) == 1, f"{app}:\n{booted.out}"
    for ds in DAEMONSETS:
        assert sorted(c[7] for n, c in pods.items() if n.startswith(ds + "-")) == sorted(NODES), ds
    for deploy in DEPLOYMENTS:
        nodes = [c[7] for n, c in pods.items() if n.startswith(deploy + "-")]
        assert len(nodes) == 2 and len(set(nodes)) == 2, f"{deploy} replicas on {nodes}"
    assert sorted(pods[f"ovn-central-{i}"][7] for i in range(3)) == sorted(NODES)
    for name, cols in pods.items():  # hostNetwork pods: their node's address
        if not cols[6].startswith("10.244."):
            assert cols[6] == NODES[cols[7]], f"{name}: {cols}"
    total = len(pods)
    assert re.search(rf"^Ready: \d+/{total} pods$", booted.out, re.M), booted.out
    assert re.search(r"^per node: node1 \d+/\d+, node2 \d+/\d+, node3 \d+/\d+$", booted.out, re.M)
    assert "Unschedulable" not in booted.out
    for node in booted.get("nodes")["items"]:
        labels, addrs = node["metadata"]["labels"], node["status"]["addresses"]
        name = node["metadata"]["name"]
        assert (
            labels["node-role.kubernetes.io/control-plane"] == "true"
            and labels["kubernetes.io/hostname"] == name
        )
        assert {"type": "InternalIP", "address": NODES[name]} in addrs


def _cluster_status(member: int, db: str) -> dict[str, Any]:
    name = {"nb": "OVN_Northbound", "sb": "OVN_Southbound"}[db]
    out = _store()("exec", container(f"ovn-central-{member}", db), "ovs-appctl", "-t",
                   f"/var/run/ovn/ovn{db}_db.ctl", "cluster/status", name)  # fmt: skip
    fields = dict(
        line.split(": ", 1) for line in out.splitlines() if ": " in line and not line.startswith(" ")
    )
    servers = [line for line in out.splitlines() if re.match(r"^\s+[0-9a-f]{4} \(", line)]
    return {"role": fields.get("Role"), "leader": fields.get("Leader"), "status": fields.get("Status"),
            "servers": servers, "sid": fields.get("Server ID", "")[:4]}  # fmt: skip


def test_ovn_central_members_form_one_raft_cluster_per_database(booted: Booted) -> None:
    for db in ("nb", "sb"):
        members = [_cluster_status(i, db) for i in range(3)]
        assert all(m["status"] == "cluster member" and len(m["servers"]) == 3 for m in members), members
        leaders = [m for m in members if m["role"] == "leader"]
        assert len(leaders) == 1, members
        assert {m["leader"] for m in members} - {"self"} <= {leaders[0]["sid"]}, members
        addresses = sorted(re.findall(r"at ssl:([\d.]+):", "\n".join(members[0]["servers"])))  # RAFT over TLS
        assert addresses == sorted(NODES.values()), members[0]["servers"]


def test_each_ovn_central_pod_exports_its_members_raft_figures(booted: Booted) -> None:
    """Issue 32 item 2: each ovn-central pod's exporter container, scraped as Prometheus would at its
    node's address, port 9476 (the pod's prometheus.io annotations): every member's daemons answer, one
    member leads each database, one northd is active."""
    pods, texts = rows(booted.out), []
    for i in range(3):
        node = pods[f"ovn-central-{i}"][7]
        status, body = http_get_in(f"{PREFIX}-{node}", f"http://{NODES[node]}:9476/metrics", timeout=10)
        assert status == 200 and promtool_problems(body) == "", body[:300]
        assert all(value(body, "ovn_central_up", target=t) == 1 for t in ("nb", "sb", "northd")), body
        texts.append(body)
    for db in ("OVN_Northbound", "OVN_Southbound"):
        assert sum(value(t, "ovn_raft_role", database=db, role="leader") or 0 for t in texts) == 1, db
        assert {value(t, "ovn_raft_cluster_servers", database=db) for t in texts} == {3.0}, db
    assert sum(value(t, "ovn_northd_status", state="active") or 0 for t in texts) == 1


def test_central_serves_every_node_chassis(booted: Booted) -> None:
    sb = container("ovn-central-0", "sb")
    out = _store()("exec", sb, "ovn-sbctl", "--no-leader-only", "--db=unix:/var/run/ovn/ovnsb_db.sock",
                   "--format=json", "--columns=name,encaps", "list", "Chassis")  # fmt: skip
    chassis = {row[0]: row[1] for row in json.loads(out)["data"]}
    assert sorted(chassis) == sorted(NODES), chassis
    encaps = _store()("exec", sb, "ovn-sbctl", "--no-leader-only", "--db=unix:/var/run/ovn/ovnsb_db.sock",
                      "--bare", "--columns=ip", "list", "Encap").split()  # fmt: skip
    assert sorted(encaps) == sorted(NODES.values())


def test_each_controller_deployment_has_one_leader(booted: Booted) -> None:
    leases = {x["metadata"]["name"]: x["spec"].get("holderIdentity", "") for x in
              booted.get("-n", "kube-system", "leases")["items"]}  # fmt: skip
    pods = rows(booted.out)
    for app in LEADERS:
        replicas = [n for n in pods if n.startswith(app + "-")]
        holder = leases.get(app, "")
        assert sum(holder.startswith(r + "_") for r in replicas) == 1, (app, holder, replicas)


WEB = """apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: xnode}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  containers:
    - name: web
      image: {image}
      command: [python3, -m, http.server, "8080"]
      ports: [{{containerPort: 8080}}]
      readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}
"""


def test_a_pod_on_node1_reaches_a_pod_on_node2_through_prismnet(booted: Booted) -> None:
    docs = [WEB.format(name=f"web-{n}", node=n, image=image_name()) for n in ("node1", "node2")]
    booted.kubectl("apply", "-f", "-", stdin="---\n".join(docs))

    def ready() -> dict[str, Any]:
        items = booted.get("-n", "default", "pods", "-l", "app=xnode")["items"]
        ok = [p for p in items if any(c["type"] == "Ready" and c["status"] == "True"
                                      for c in p.get("status", {}).get("conditions", []))]  # fmt: skip
        return {p["metadata"]["name"]: p for p in ok} if len(ok) == 2 else {}

    pods = wait_for(ready, 60, "web-node1 and web-node2 Ready")
    a, b = pods["web-node1"], pods["web-node2"]
    assert (a["spec"]["nodeName"], b["spec"]["nodeName"]) == ("node1", "node2")
    ip_a, ip_b = a["status"]["podIP"], b["status"]["podIP"]
    assert ip_a.startswith("10.244.") and ip_b.startswith("10.244.")
    ping = subprocess.run(["ip", "netns", "exec", f"cni-{a['metadata']['uid']}", "ping", "-c3", "-W2", ip_b],
                          capture_output=True, text=True)  # fmt: skip
    assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
    get = "import urllib.request, sys; print(urllib.request.urlopen(sys.argv[1], timeout=5).status)"
    for src, dst in (("web-node1", ip_b), ("web-node2", ip_a)):
        out = _store()("exec", container(src, "web"), "python3", "-c", get, f"http://{dst}:8080/")
        assert out == "200", (src, dst, out)
    booted.kubectl("delete", "-n", "default", "pod", "web-node1", "web-node2", "--wait=false")


FIRST_QUERIES = """
import json, socket, time
from dnslib import DNSRecord
query = DNSRecord.question("cluster-dns.kube-system.svc.cluster.local").pack()
got = []
for _ in range(6):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        s.sendto(query, ("10.96.0.10", 53))
        try:
            reply, (source, _port) = s.recvfrom(512)
            got.append(f"{source} rcode {DNSRecord.parse(reply).header.rcode}")
        except OSError:
            got.append("timeout")
print(json.dumps(got), flush=True)
time.sleep(100000)
"""
"""Six A queries for the cluster DNS's own name, one socket (one source port) each, from the first
moment the pod runs: what each got, as a resolver checks it (source address and RCODE)."""


def test_a_new_namespaces_first_pod_gets_dns_answers_from_its_first_query(booted: Booted) -> None:
    """A tenant namespace's first pod (a default-deny ingress policy in it, as projects have), on a
    node with no cluster DNS replica: its switch is made as the pod starts, and its very first query
    to the cluster DNS Service is answered by 10.96.0.10 (the switch has fiberlb's load balancers from
    its first row: through the cluster router alone, the reply, routed on the DNS pod's node, came back
    from the pod's own address and the default deny dropped it)."""
    dns_nodes = {p["spec"]["nodeName"] for p in booted.get("-n", "kube-system", "pods", "-l",
                 "app.kubernetes.io/name=flashdns-controller")["items"]}  # fmt: skip
    node = next(n for n in NODES if n not in dns_nodes)
    ns = "first-dns"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "first", "namespace": ns},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "restartPolicy": "Never",
                    "containers": [{"name": "first", "image": image_name(),
                                    "command": ["python3", "-c", FIRST_QUERIES]}]}}  # fmt: skip
    deny = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny", "namespace": ns},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}  # fmt: skip
    booted.kubectl("create", "namespace", ns)
    booted.kubectl("apply", "-f", "-", stdin=json.dumps(deny))
    booted.kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def printed() -> list[str]:
        proc = booted.run("-n", ns, "logs", "first")
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")] if proc.returncode == 0 else []
        return list(json.loads(lines[0])) if lines else []

    got = wait_for(printed, 90, f"the first pod's queries on {node} (kubectl logs)")
    # before the fix the first query (and every other sent before fiberlb attached its group, ~1 s)
    # timed out; a single later loss is left to the resolver's retry (seen once in ~40 pods just after
    # a boot, with no verdict logged: not this)
    answered = [g for g in got if g != "timeout"]
    assert got[0] == "10.96.0.10 rcode 0" and set(answered) == {got[0]} and len(answered) >= 5, got
    booted.kubectl("delete", "namespace", ns, "--wait=false")


def test_an_admins_everyday_kubectl(booted: Booted) -> None:
    """kubectl's typed `create deployment` (a protobuf body), the scheduler's and kubelet's Events in
    `get events -A` and `describe pod`, and the k3s servers' ROLES."""
    booted.kubectl("create", "namespace", "admin-day")
    image = f"--image={image_name()}"
    booted.kubectl("-n", "admin-day", "create", "deployment", "day", image, "--replicas=2",
                   "--", "python3", "-m", "http.server", "8080")  # fmt: skip

    def started() -> list[Any]:
        items = booted.get("events", "-n", "admin-day")["items"]
        got = [e for e in items if e["reason"] == "Started"]
        return got if len(got) >= 2 else []

    wait_for(started, 90, "kubelet's Started events of the 2 pods of deployment day")
    rows_ = booted.kubectl("get", "events", "-A").splitlines()
    ours = [r.split() for r in rows_ if r.startswith("admin-day ")]
    reasons = {r[3] for r in ours}  # NAMESPACE, LAST SEEN (one word in the rows), TYPE, REASON
    assert {"Scheduled", "Pulled", "Created", "Started"} <= reasons, rows_
    events = booted.get("events", "-n", "admin-day")["items"]
    by = {(e["reason"], e.get("reportingComponent")) for e in events}
    assert ("Scheduled", "default-scheduler") in by and ("Started", "kubelet") in by, by
    pod = next(p for p in booted.get("-n", "admin-day", "pods")["items"])
    described = booted.kubectl("-n", "admin-day", "describe", "pod", pod["metadata"]["name"])
    section = described[described.index("Events:") :]
    assert "Successfully assigned admin-day/" in section and "Started container k8shost" in section, (
        section
    )  # kubectl names it after the image
    nodes = [r.split() for r in booted.kubectl("get", "nodes").splitlines()]
    assert nodes[0][:3] == ["NAME", "STATUS", "ROLES"]
    assert {n[0]: n[2] for n in nodes[1:]} == {n: "control-plane,etcd,master" for n in NODES}, nodes
    booted.kubectl("delete", "namespace", "admin-day", "--wait=false")


def test_a_second_boot_is_refused_with_what_to_do(booted: Booted, tmp_path: Path) -> None:
    again = cli("boot", "--run-dir", str(booted.run_dir), "--netns-prefix", PREFIX, "--nodes", "3")
    assert again.returncode == 1 and "already booted" in again.stderr, again.stderr
    elsewhere = cli("boot", "--run-dir", str(tmp_path / "b"), "--netns-prefix", PREFIX, "--nodes", "3")
    assert elsewhere.returncode == 1 and f"network namespaces {PREFIX}-" in elsewhere.stderr, elsewhere.stderr
    assert not (tmp_path / "b").exists()
    status = cli("status", "--run-dir", str(booted.run_dir))
    assert status.returncode == 0 and set(rows(status.stdout)) >= set(rows(booted.out)), status.stdout
    assert "per node: node1 " in status.stdout, status.stdout
