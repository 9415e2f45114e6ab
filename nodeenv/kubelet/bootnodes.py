"""`boot --nodes N` (N >= 2): the admin's path on N nodes of this machine, as an HA k3s has them.

1. the nodes: network namespaces on an underlay (nodeenv/kubelet/nodenet.py, cluster mode's
   underlay code), each with its address on its uplink;
2. the API double on loopback (the admin's kubectl) and on the underlay's central address
   (`--also-listen`, as cluster mode serves it), where the nodes' runners and their pods reach it;
3. the overlay applied as on one node (boot.apply_overlay), k8shost-config's OVN endpoints being
   every control-plane node's address (README "Installing on k3s": all three members);
4. one runner per node (`python -m nodeenv.kubelet run --netns <node's netns>`: the node's kubelet
   in its network, with the machine's mounts), registering its Node (a k3s server's
   control-plane label on nodes 1-3, the underlay address as InternalIP), so a hostNetwork pod is
   in its node's namespace, a probe goes from there and a pod's CNI ADD runs there; node1's runner
   also plays kube-controller-manager and the scheduler (--controllers), the others do not;
5. while waiting for the pods: the nodes' host setup as each becomes due (nodenet.BootNodes.host_setup).

`down`: every runner SIGTERMed at once (each stops its pod-network pods, then its host-network
ones, so the CNI DELs run while ovn-central's members are still up), then the API double, then
the namespaces by prefix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping

from nodeenv.cluster.control import API_PORT
from nodeenv.daemons import DaemonError, is_alive, start_foreground
from nodeenv.daemons import stop as stop_daemon
from nodeenv.daemons import wait_for as wait_until
from nodeenv.kubelet import boot
from nodeenv.kubelet.boot import BootSettings
from nodeenv.kubelet.nodenet import BootNodes, require_free

SERVERS = 3
"""Nodes 1..3 are k3s servers (control-plane), any further ones agents."""
SERVER_LABELS = "node-role.kubernetes.io/control-plane=true,node-role.kubernetes.io/master=true"


def boot_nodes(s: BootSettings) -> BootNodes:
    return BootNodes(s.prefix, s.nodes, s.run_dir)


def start(s: BootSettings, env: Mapping[str, str]) -> BootNodes:
    nodes = boot_nodes(s)
    require_free(nodes)
    s.run_dir.mkdir(parents=True, exist_ok=True)
    (s.run_dir / "boot.json").write_text(json.dumps({"nodes": s.nodes, "prefix": s.prefix}))
    nodes.create()
    boot.say(f"{s.nodes} nodes: " + ", ".join(f"{n.name} {n.address} ({n.netns})" for n in nodes.nodes))
    py, table = sys.executable, s.table()
    port_file = s.run_dir / "kubeapi.json"
    port_file.unlink(missing_ok=True)
    also = f"{nodes.underlay.netns}={nodes.central_address}:{API_PORT}"
    argv = [py, "-m", "nodeenv.kubeapi", "--dir", str(s.run_dir / "kubeapi"), "--host", "127.0.0.1",
            "--port", str(s.api_port), "--port-file", str(port_file), "--also-listen", also]  # fmt: skip
    py_env = {**env, "PYTHONPATH": str(boot.ROOT)}
    _, proc = start_foreground("kubeapi", argv, s.run_dir / "kubeapi.log", py_env, table)
    wait_until(port_file.exists, "the API double", 30, proc)
    info = json.loads(port_file.read_text())
    nodes_kubeconfig, nodes_url = info["also"][0]["kubeconfig"], info["also"][0]["url"]
    boot.say(f"API double at {info['url']}, for the nodes at {nodes_url} (log {s.run_dir / 'kubeapi.log'})")
    servers = [n.address for n in nodes.nodes[:SERVERS]]
    boot.apply_overlay(s, s.run_dir, servers)
    boot.say(f"applied {s.overlay} with kubectl")
    dns = boot.kubectl(s, "-n", boot.NS, "get", "service", "cluster-dns", "-o", "jsonpath={.spec.clusterIP}")
    for n in nodes.nodes:
        argv = [py, "-m", "nodeenv.kubelet", "run", "--netns", n.netns,
                "--kubeconfig", nodes_kubeconfig, "--node-name", n.name, "--node-ip", n.address,
                "--node-root", str(n.root), "--state-dir", str(s.run_dir / f"pods{n.index}"),
                "--cluster-dns", dns.strip(), "--node-labels", SERVER_LABELS if n.index <= SERVERS else "",
                "--controllers", "true" if n.index == 1 else "false"]  # fmt: skip
        log = s.run_dir / f"kubelet-{n.name}.log"
        start_foreground(f"kubelet-{n.name}", argv, log, py_env, table)
        boot.say(f"runner for {n.name} in {n.netns} (log {log})")
    return nodes


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


def stop_runners(s: BootSettings) -> list[str]:
    """SIGTERM every node's runner at once, then wait for each (kubelet's own shutdown)."""
    runners = [r for r in s.table().load() if r.name.startswith("kubelet-") and is_alive(r)]
    for r in runners:
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.pid, signal.SIGTERM)
    for r in runners:
        stop_daemon(r, timeout=120)
    return [r.name for r in runners]


def down(s: BootSettings, prefix: str, count: int) -> int:
    stopped = stop_runners(s)
    stopped += s.table().stop_all(timeout=30)
    gone = BootNodes(prefix, count, s.run_dir).destroy()
    if not boot.remove_run_dir(s):
        return 1
    print(f"boot-down: stopped {', '.join(stopped) or 'nothing'}; removed the namespaces {', '.join(gone)} "
          f"and {s.run_dir}")  # fmt: skip
    return 0
