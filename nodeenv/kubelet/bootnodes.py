"""`boot --nodes N` (N >= 2): the admin's path on N nodes of this machine, as an HA k3s has them.

1. the nodes: network namespaces on an underlay (nodeenv/kubelet/nodenet.py, cluster mode's
   underlay code), each with its address on its uplink;
2. the API double on loopback (the admin's kubectl) and on the underlay's central address
   (`--also-listen`, as cluster mode serves it), where the nodes' runners and their pods reach it;
3. one runner per node (`python -m nodeenv.kubelet run --netns <node's netns>`: the node's kubelet
   in its network, with the machine's mounts), registering its Node (a k3s server's
   control-plane label on nodes 1-3, the underlay address as InternalIP), so a hostNetwork pod is
   in its node's namespace, a probe goes from there and a pod's CNI ADD runs there; node1's runner
   also plays kube-controller-manager and the scheduler (--controllers), the others do not; each
   serves the kubelet API on its address, port 10250 (certificates from `<run dir>/kubelet-pki`),
   which the API double reaches from the underlay's namespace (--kubelet-netns) for kubectl
   logs/exec/port-forward and metrics-server's scrape of /metrics/resource (kubectl top);
4. once every Node is registered (the cluster is up, as when an admin applies to it), the overlay
   applied as on one node (boot.apply_overlay), k8shost-config's OVN endpoints being every
   control-plane node's address (README "Installing on k3s": all three members);
5. while waiting for the pods: the nodes' host setup as each becomes due (nodenet.BootNodes.host_setup).

`down`: every runner drained at once (SIGUSR1: each stops its pod-network pods, so the CNI DELs
run while ovn-central's members on every node are still up), then SIGTERMed (its host-network
pods), then the API double; what a killed runner left is swept; the namespaces deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv.cluster.control import API_PORT
from nodeenv.daemons import DaemonError, is_alive, start_foreground
from nodeenv.daemons import stop as stop_daemon
from nodeenv.daemons import wait_for as wait_until
from nodeenv.image.store import ImageStore
from nodeenv.kubelet import boot, rootdir
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.boot import BootSettings
from nodeenv.kubelet.kubeletapi.pki import KubeletPki, make_kubelet_pki
from nodeenv.kubelet.nodenet import BootNodes, require_free
from nodeenv.kubelet.runner import RUNNER_LABEL

SERVERS = 3
"""Nodes 1..3 are k3s servers (control-plane), any further ones agents."""
API_DATA = "kubeapi-data"
"""The API double's --data-dir in the run dir."""
SERVER_LABELS = (  # what k3s labels an HA server with (embedded etcd): ROLES control-plane,etcd,master
    "node-role.kubernetes.io/control-plane=true,node-role.kubernetes.io/etcd=true,"
    "node-role.kubernetes.io/master=true"
)


def boot_nodes(s: BootSettings) -> BootNodes:
    return BootNodes(s.prefix, s.nodes, s.short_dir)


def start(s: BootSettings, env: Mapping[str, str]) -> BootNodes:
    nodes = boot_nodes(s)
    require_free(nodes)
    s.make_run_dir()
    (s.run_dir / "boot.json").write_text(json.dumps({"nodes": s.nodes, "prefix": s.prefix}))
    nodes.create()
    boot.say(f"{s.nodes} nodes: " + ", ".join(f"{n.name} {n.address} ({n.netns})" for n in nodes.nodes))
    kubelets = make_kubelet_pki(s.run_dir / "kubelet-pki", [(n.name, n.address) for n in nodes.nodes])
    nodes_kubeconfig, nodes_url = start_api(s, nodes, env, kubelets)
    start_runners(s, nodes, env, nodes_kubeconfig, kubelets)
    client = KubeClient.from_kubeconfig(s.kubeconfig)
    names = {n.name for n in nodes.nodes}

    def registered() -> bool:
        return names <= {x["metadata"]["name"] for x in client.request("GET", "/api/v1/nodes")["items"]}

    wait_until(registered, f"the runners to register {', '.join(sorted(names))}", 60)
    boot.say(f"Nodes {', '.join(sorted(names))} registered")
    boot.apply_overlay(s, s.run_dir, [n.address for n in nodes.nodes[:SERVERS]])
    boot.say(f"applied {s.overlay} with kubectl")
    boot.start_volume_service(s, env, nodes.central_address, sorted(names), nodes.underlay.netns)
    boot.start_monitoring(s, nodes_url, nodes.nodes[0].netns)  # node1: as a hostNetwork pod there
    return nodes


def start_api(
    s: BootSettings, nodes: BootNodes, env: Mapping[str, str], kubelets: KubeletPki
) -> tuple[str, str]:
    """The API double, its objects kept in `<run dir>/kubeapi-data` (k3s's datastore: a power loss
    keeps them); the nodes' kubeconfig and URL."""
    port_file = s.run_dir / "kubeapi.json"
    port_file.unlink(missing_ok=True)
    also = f"{nodes.underlay.netns}={nodes.central_address}:{API_PORT}"
    argv = [sys.executable, "-m", "nodeenv.kubeapi", "--dir", str(s.run_dir / "kubeapi"), "--host",
            "127.0.0.1", "--port", str(s.api_port), "--port-file", str(port_file), "--also-listen", also,
            "--data-dir", str(s.run_dir / API_DATA),
            "--admission-control-config-file", str(boot.POD_SECURITY),
            *kubelets.apiserver_flags(nodes.underlay.netns)]  # fmt: skip
    py_env = {**env, "PYTHONPATH": str(boot.ROOT)}
    _, proc = start_foreground("kubeapi", argv, s.run_dir / "kubeapi.log", py_env, s.table())
    wait_until(port_file.exists, "the API double", 30, proc)
    info = json.loads(port_file.read_text())
    nodes_kubeconfig, nodes_url = info["also"][0]["kubeconfig"], info["also"][0]["url"]
    boot.say(f"API double at {info['url']}, for the nodes at {nodes_url} (log {s.run_dir / 'kubeapi.log'})")
    return nodes_kubeconfig, nodes_url


def start_runners(
    s: BootSettings, nodes: BootNodes, env: Mapping[str, str], kubeconfig: str, kubelets: KubeletPki
) -> None:
    """A runner per node, in the node's namespace (node1's plays the controllers and the scheduler)."""
    dns = cluster_dns(s)
    py_env = {**env, "PYTHONPATH": str(boot.ROOT)}
    for n in nodes.nodes:
        argv = [sys.executable, "-m", "nodeenv.kubelet", "run", "--netns", n.netns,
                "--kubeconfig", kubeconfig, "--node-name", n.name, "--node-ip", n.address,
                "--node-root", str(n.root), "--state-dir", str(s.short_dir / f"pods{n.index}"),
                "--cluster-dns", dns, "--node-labels", SERVER_LABELS if n.index <= SERVERS else "",
                "--controllers", "true" if n.index == 1 else "false",
                *kubelets.kubelet_flags(n.name)]  # fmt: skip
        log = s.run_dir / f"kubelet-{n.name}.log"
        start_foreground(f"kubelet-{n.name}", argv, log, py_env, s.table())
        boot.say(f"runner for {n.name} in {n.netns} (log {log})")


def cluster_dns(s: BootSettings) -> str:
    """kubelet's clusterDNS: the overlay's `cluster-dns` Service address (README "Installing on k3s"
    has the admin set it in the k3s config before the overlay is applied; read from the overlay)."""
    docs = yaml.safe_load_all(boot.kubectl(s, "kustomize", str(s.overlay)))
    for d in docs:
        if d and d.get("kind") == "Service" and d["metadata"]["name"] == "cluster-dns":
            return str(d["spec"]["clusterIP"])
    raise boot.BootError(f"{s.overlay} has no cluster-dns Service (kubelet's clusterDNS)")


def service_cidr(s: BootSettings) -> str:
    out = boot.kubectl(s, "-n", boot.NS, "get", "configmap", "k8shost-config", "-o",
                       "jsonpath={.data.SERVICE_CIDR}")  # fmt: skip
    return out.strip() or "10.96.0.0/12"


def host_setup(nodes: BootNodes, cidr: str) -> Callable[[], bool]:
    """What boot.wait_ready runs every round: the host-setup steps due (a failed one named and
    tried again next round); whether every node's are done."""

    def tick() -> bool:
        try:
            for did in nodes.host_setup(cidr):
                boot.say(f"host setup: {did}")
        except DaemonError as e:
            boot.say(f"host setup: {e} (trying again)")
        return nodes.complete()

    return tick


def stop_runners(s: BootSettings, nodes: BootNodes) -> list[str]:
    """Drain every node's runner at once (SIGUSR1: its pod-network pods stopped while OVN central's
    members on every node still serve their CNI DELs), wait until no pod's network namespace is
    left (60 s at most), then SIGTERM them all and wait for each (kubelet's own shutdown)."""
    runners = [r for r in s.table().load() if r.name.startswith("kubelet-") and is_alive(r)]
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        for r in runners:
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.pid, sig)
        if sig == signal.SIGUSR1:
            with contextlib.suppress(DaemonError):
                wait_until(lambda: not pod_netns(s, nodes), "the nodes to drain", 60)
    for r in runners:
        stop_daemon(r, timeout=120)
    return [r.name for r in runners]


def pod_netns(s: BootSettings, nodes: BootNodes) -> list[str]:
    """The network namespaces of the pods of every node (`cni-<pod uid>`) that exist."""
    uids = (p.name for n in nodes.nodes for p in (s.run_dir / f"pods{n.index}").glob("*"))
    return [f"cni-{u}" for u in uids if Path(f"/run/netns/cni-{u}").exists()]


def sweep(s: BootSettings, nodes: BootNodes) -> list[str]:
    """What a runner that had to be killed left: its containers, its pods' network namespaces, its
    kubelet root's mount (nothing when every runner stopped by itself)."""
    store, left = ImageStore.from_env(os.environ), []
    for n in nodes.nodes:
        ids = store("ps", "-a", "-q", "--filter", f"label={RUNNER_LABEL}={n.name}", check=False).split()
        if ids:
            store("rm", "-f", "-t", "1", *ids, check=False)
            left.append(f"{n.name}: {len(ids)} containers")
    for name in pod_netns(s, nodes):
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        left.append(f"netns {name}")
    for n in nodes.nodes:
        kubelet_dir = n.root / "var/lib/kubelet"
        if subprocess.run(["mountpoint", "-q", str(kubelet_dir)]).returncode == 0:
            rootdir.teardown(kubelet_dir)
            left.append(f"{n.name}: {kubelet_dir} mount")
    return left


def down(s: BootSettings, prefix: str, count: int) -> int:
    nodes = BootNodes(prefix, count, s.short_dir)
    stopped = stop_runners(s, nodes)
    stopped += s.table().stop_all(timeout=30)
    swept = sweep(s, nodes)
    if swept:
        print(f"boot-down: removed what killed runners left: {'; '.join(swept)}", file=sys.stderr)
    gone = nodes.destroy()
    if not boot.remove_run_dir(s):
        return 1
    print(f"boot-down: stopped {', '.join(stopped) or 'nothing'}; removed the namespaces {', '.join(gone)} "
          f"and {s.run_dir}")  # fmt: skip
    return 0
