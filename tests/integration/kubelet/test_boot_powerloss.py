"""A power loss of the whole booted cluster, pods included, and its boot again from disk (issue 29
item 2b; docs/cold-restart.md): `python -m nodeenv.kubelet powerloss` SIGKILLs every process of the
three nodes at once (the API double, the runners, every container: OVS/OVN, ovn-central's members,
the agents, the controllers, the workloads) and drops their namespaces, mounts and /run; `resume`
boots the same run dir again. Then:

- every pod of the cluster is Ready again (the runners restarted them in new sandboxes), and the
  API kept every object: the pods' uids, the Services' ClusterIPs and LoadBalancer IPs;
- OVN came back from its files: one chassis per node (none duplicated), each pod's port once with
  the address the pod now has, no address held twice, no OVS interface left without its device;
  no network namespace of a pod that is not running;
- traffic works again: a pod on node1 reaches a pod on node2, the LoadBalancer IP, and resolves the
  Service's name through the cluster DNS; the times from `resume`'s start are printed.

The last module on the shared boot (conftest.SHARED_BOOT_ORDER): its cluster is then removed by
`down` as after any boot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cni.ovn import K_NS, K_POD
from nodeenv.image.build import image_name
from nodeenv.image.store import ImageStore
from nodeenv.kubelet.boot import waiting_for
from nodeenv.kubelet.runner import RUNNER_LABEL
from tests.integration.kubelet.boot_session import Booted, cli
from tests.integration.kubelet.conftest import wait_for

NODES = ("node1", "node2", "node3")
WEB = """apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: plweb}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  containers:
    - name: web
      image: {image}
      command: [python3, -m, http.server, "8080"]
      ports: [{{containerPort: 8080}}]
      readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}
"""
SERVICE = """apiVersion: v1
kind: Service
metadata: {name: plweb, namespace: default}
spec: {type: LoadBalancer, selector: {app: plweb}, ports: [{port: 80, targetPort: 8080}]}
"""
DATA = """apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: pldata, namespace: default}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: lightningstor-ssd
  resources: {{requests: {{storage: 64Mi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: pldata, namespace: default}}
spec:
  nodeSelector: {{kubernetes.io/hostname: node2}}
  containers:
    - {{name: web, image: {image}, command: [sleep, infinity], volumeMounts: [{{name: d, mountPath: /data}}]}}
  volumes: [{{name: d, persistentVolumeClaim: {{claimName: pldata}}}}]
"""
GET = "import urllib.request, sys; print(urllib.request.urlopen(sys.argv[1], timeout=3).status)"
RESOLVE = "import socket, sys; print(socket.gethostbyname(sys.argv[1]))"


def _store() -> ImageStore:
    return ImageStore.from_env(os.environ)


def container(pod: str, name: str) -> str:
    names = _store()("ps", "--format", "{{.Names}}").split()
    now = [n for n in names if n.startswith(f"k8s_{name}_{pod}_") and not n.endswith("_previous")]
    return now[0] if now else f"k8s_{name}_{pod}_"


def process_state(pid: int, cgroup: str) -> str:
    """What `pid`, a container's process by podman's record, is now: "gone"; "zombie" (SIGKILLed with
    its conmon, re-parented to the machine's init, not yet reaped: dead, only its pid entry left);
    "other" (a process outside the container's cgroup, which the pid was given to since); "running"."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return "gone"
    if state == "Z":
        return "zombie"
    return "running" if not cgroup or cgroup in cgroups else "other"


def container_processes(pods: dict[str, Any]) -> dict[str, str]:
    """The containers of these pods (uid -> pod) that podman recorded a process for, and what that
    process is now (process_state; podman's own state of a container whose conmon was killed stays
    `running`: the process is what counts)."""
    ours = tuple(f"_{p['metadata']['namespace']}_{uid[:8]}" for uid, p in pods.items())
    names = _store()("ps", "-a", "--filter", f"label={RUNNER_LABEL}", "--format", "{{.Names}}").split()
    names = [n for n in names if n.removesuffix("_previous").endswith(ours)]
    if not names:
        return {}
    out = _store()(
        "inspect", "--format", "{{.Name}} {{.State.Pid}} {{.State.CgroupPath}}", *names, check=False
    )
    rows = [[*line.split(), ""][:3] for line in out.splitlines()]
    return {n: process_state(int(pid), cgroup) for n, pid, cgroup in rows if pid != "0"}


def in_pod(pod: str, *argv: str) -> tuple[int, str]:
    """`argv` run in the pod's `web` container (exit status 125 while it is not running)."""
    proc = subprocess.run(_store().command("exec", container(pod, "web"), *argv), env=_store().run_env(),
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    return proc.returncode, proc.stdout.strip()


def ready(p: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])
    )


def web_pods(booted: Booted) -> dict[str, Any]:
    items = booted.get("-n", "default", "pods", "-l", "app=plweb")["items"]
    return {p["metadata"]["name"]: p for p in items} if len(items) == 2 and all(map(ready, items)) else {}


def lb_ips(booted: Booted) -> dict[str, tuple[str, list[str]]]:
    """Service -> (ClusterIP, LoadBalancer ingress IPs)."""
    return {
        f"{s['metadata']['namespace']}/{s['metadata']['name']}": (
            s["spec"].get("clusterIP", ""),
            sorted(
                i.get("ip", "") for i in (s.get("status", {}).get("loadBalancer", {}).get("ingress") or [])
            ),
        )
        for s in booted.get("-A", "services")["items"]
    }


def ovn_json(db: str, table: str, columns: str) -> list[list[Any]]:
    tool = {"nb": "ovn-nbctl", "sb": "ovn-sbctl"}[db]
    out = _store()("exec", container("ovn-central-0", db), tool, "--no-leader-only",
                   f"--db=unix:/var/run/ovn/ovn{db}_db.sock", "--format=json", f"--columns={columns}", "list",
                   table)  # fmt: skip
    rows: list[list[Any]] = json.loads(out)["data"]
    return rows


def pod_ports(pods: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str]]:
    """How many NB ports each pod (ns/name) has, and how many ports hold each address."""
    per_pod: Counter[str] = Counter()
    per_ip: Counter[str] = Counter()
    names = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
    for _, addresses, ids in ovn_json("nb", "Logical_Switch_Port", "name,addresses,external_ids"):
        ext = dict(ids[1])
        key = f"{ext.get(K_NS, '')}/{ext.get(K_POD, '')}"
        addrs = addresses[1] if isinstance(addresses, list) and addresses[0] == "set" else [addresses]
        for ip in re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", " ".join(a for a in addrs if isinstance(a, str))):
            per_ip[ip] += 1
        if key in names:
            per_pod[key] += 1
    return per_pod, per_ip


def first_ok(check: Any, timeout: float, what: str, since: float) -> float:
    wait_for(check, timeout, what)
    return time.monotonic() - since


def test_a_power_loss_of_the_whole_cluster_comes_back_from_disk(booted: Booted) -> None:
    docs = [WEB.format(name=f"plweb-{n}", node=n, image=image_name()) for n in ("node1", "node2")]
    booted.kubectl("apply", "-f", "-", stdin="---\n".join([*docs, SERVICE, DATA.format(image=image_name())]))
    wait_for(lambda: web_pods(booted), 90, "plweb-node1 and plweb-node2 Ready")
    written = f"before the power loss {time.time()}"
    wait_for(lambda: in_pod("pldata", "sh", "-c", f"echo '{written}' > /data/f && sync")[0] == 0, 120,
             "pldata to write its volume")  # fmt: skip
    wait_for(lambda: lb_ips(booted)["default/plweb"][1], 60, "plweb's LoadBalancer IP")
    before_pods = {p["metadata"]["uid"]: p for p in booted.get("-A", "pods")["items"]}
    before_services = lb_ips(booted)
    running = Counter(container_processes(before_pods).values())
    assert running["running"] > 30 and running["other"] == 0, running  # each found in its own cgroup

    lost = cli("powerloss", "--run-dir", str(booted.run_dir), timeout=120)
    assert lost.returncode == 0, lost.stdout + lost.stderr
    print(lost.stdout.strip())
    after = container_processes(before_pods)
    print(f"the containers' processes right after powerloss: {dict(Counter(after.values()))}")
    assert [n for n, state in after.items() if state == "running"] == [], "every container's process is gone"

    t0 = time.monotonic()
    resumed = cli("resume", "--run-dir", str(booted.run_dir), "--api-port", "0", timeout=600)
    ready_s = time.monotonic() - t0
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]

    pods = booted.get("-A", "pods")["items"]
    assert {p["metadata"]["uid"] for p in pods} == set(before_pods), "the API kept every pod, by uid"
    assert waiting_for(pods) == []
    assert lb_ips(booted) == before_services, "ClusterIPs and LoadBalancer IPs unchanged"

    chassis = [row[0] for row in ovn_json("sb", "Chassis", "name")]
    assert sorted(chassis) == sorted(NODES), chassis
    on_network = [p for p in pods if not p["spec"].get("hostNetwork") and p["status"].get("podIP")]
    per_pod, per_ip = pod_ports(on_network)
    assert {k for k, n in per_pod.items() if n != 1} == set(), per_pod
    assert {ip for ip, n in per_ip.items() if n > 1} == set(), "an address held by two ports"
    assert all(per_ip[p["status"]["podIP"]] == 1 for p in on_network), "each pod's address on its port"
    same = sum(
        p["status"]["podIP"] == before_pods[p["metadata"]["uid"]]["status"].get("podIP") for p in on_network
    )
    netns = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    uids = {f"cni-{p['metadata']['uid']}" for p in pods}
    assert {n for n in netns if n.startswith("cni-")} & uids == {
        f"cni-{p['metadata']['uid']}" for p in on_network
    }
    for node in NODES:
        db = booted.run_dir / node / "run/openvswitch/db.sock"
        out = subprocess.run(["ovs-vsctl", f"--db=unix:{db}", "--bare", "--columns=name", "find", "Interface",
                              "ofport=-1"], capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 0 and out.stdout.split() == [], (node, out.stdout, out.stderr)

    web = web_pods(booted)
    ip2, lb = web["plweb-node2"]["status"]["podIP"], lb_ips(booted)["default/plweb"][1][0]
    name, cluster_ip = "plweb.default.svc.cluster.local", before_services["default/plweb"][0]
    checks = {"across": (GET, f"http://{ip2}:8080/", "200"), "lb": (GET, f"http://{lb}/", "200"),
              "dns": (RESOLVE, name, cluster_ip)}  # fmt: skip
    kept = first_ok(lambda: in_pod("pldata", "cat", "/data/f") == (0, written), 120, "pldata's file", t0)
    took = {k: first_ok(lambda c=c: in_pod("plweb-node1", "python3", "-c", c[0], c[1]) == (0, c[2]), 120,
                        f"plweb-node1: {k}", t0) for k, c in checks.items()}  # fmt: skip
    across, via_lb, dns = took["across"], took["lb"], took["dns"]
    print(f"power loss: {len(pods)} pods ({len(on_network)} on the pod network, {same} kept their address); "
          f"from resume's start: every pod Ready {ready_s:.1f} s, pod to pod across nodes {across:.1f} s, "
          f"LoadBalancer IP {via_lb:.1f} s, DNS {dns:.1f} s, volume read {kept:.1f} s")  # fmt: skip
    booted.kubectl(
        "delete", "-n", "default", "pod/plweb-node1", "pod/plweb-node2", "service/plweb", "pod/pldata"
    )
    booted.kubectl("delete", "-n", "default", "pvc/pldata")
