"""The node's network booted from the image as kubelet runs it, with no other OVS/OVN on the machine:
ovn-central (nb, sb, northd), ovs-node (ovsdb-server + ovs-vswitchd, ovn-controller) and the
prismnet-agent DaemonSet (its init container writes the plugin and the conflist into the node's
hostPath CNI dirs), every container Ready through its own probes; then pods the runner starts
through that conflist alone get PrismNET addresses, their OVS ports are ovn-installed and they
reach each other (ping, TCP).

The containers are the node's OVS (the userspace datapath, `OVS_DATAPATH_TYPE: netdev` in
k8shost-config as README install step 2 allows: there is no openvswitch kernel module here), and
only one such ovs-vswitchd runs per machine: this module boots once (module scope) and is run
before the session's OVN node starts (the `own_ovs` mark, tests/conftest.py), and it refuses to
start while another holds the datapath."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.runner import Runner
from nodeenv.kubelet.sandbox import CniConfig
from nodeenv.ovn_stack import USERSPACE_DATAPATH_DEV
from tests.conftest import require_ovn
from tests.integration.kubeapi.test_kubeapi_kubectl import apply_file, kubectl
from tests.integration.kubeapi.test_kubeapi_overlay import OVERLAY, install_crds
from tests.integration.kubelet.conftest import NS, start_runner, wait_for
from tests.integration.kubelet.test_boot_fast import conditions
from tests.kubeapi_fixture import KubeApiHandle

pytestmark = pytest.mark.own_ovs

NETWORK = {"ovn-central": 3, "ovs-node": 2, "prismnet-agent": 1}
"""The node's network workloads and their containers."""
NB, SB = "tcp:127.0.0.1:6641", "tcp:127.0.0.1:6642"
CNI = CniConfig(Path("/etc/cni/net.d"), ("/opt/cni/bin", "/usr/lib/cni"), node_root=Path("/"))
"""containerd's defaults (conf_dir, bin_dir); the node root is set per boot."""
ECHO = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      containers:
        - name: echo
          image: registry.plasmacloud.io/k8shost:0.1.0
          command: [python3, -m, http.server, "8080"]
          ports: [{containerPort: 8080}]
          readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
"""


@dataclass
class Booted:
    api: KubeApiHandle
    runner: Runner
    root: Path
    """The node's root (hostPaths)."""

    def vsctl(self, *args: str) -> str:
        db = f"unix:{self.root / 'run/openvswitch/db.sock'}"
        return subprocess.run(["ovs-vsctl", f"--db={db}", "--timeout=5", *args],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiHandle]:
    threaded = ThreadedKubeApi(tmp_path_factory.mktemp("kubeapi"), ApiConfig(bookmark_interval=1.0))
    threaded.start()
    try:
        yield KubeApiHandle(threaded)
    finally:
        threaded.stop()


def _links() -> set[str]:
    return {p.name for p in Path("/sys/class/net").iterdir()}


def _app(pod: str, apps: dict[str, int]) -> str:
    return next((a for a in apps if pod.startswith(a + "-")), pod)


def _internal_ports(root: Path) -> set[str]:
    """The userspace datapath's tap devices of the node's vswitchd (ovs-vswitchd leaves them behind)."""
    db = f"unix:{root / 'run/openvswitch/db.sock'}"
    argv = ["ovs-vsctl", f"--db={db}", "--timeout=5", "--bare", "--columns=name", "find", "Interface"]
    out = subprocess.run([*argv, "type=internal"], capture_output=True, text=True).stdout
    return {USERSPACE_DATAPATH_DEV, *out.split()}


def _ready(api: KubeApiHandle, want: dict[str, int]) -> dict[str, Any] | None:
    """The pods when, for each app in `want`, that many of its pods are Ready."""
    ps = {p["metadata"]["name"]: p for ns in (NS, "default") for p in api.objects("pods", ns)}
    got: dict[str, int] = {}
    for name, p in ps.items():
        if conditions(p).get("Ready") == "True":
            got[_app(name, want)] = got.get(_app(name, want), 0) + 1
    _ready.last = {n: p.get("status", {}).get("containerStatuses") for n, p in ps.items()}  # type: ignore[attr-defined]
    return ps if all(got.get(w, 0) >= n for w, n in want.items()) else None


@pytest.fixture(scope="module")
def network(kube_api: KubeApiHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Booted]:
    require_ovn()
    if Path(f"/sys/class/net/{USERSPACE_DATAPATH_DEV}").exists():
        pytest.fail(f"{USERSPACE_DATAPATH_DEV} exists: another ovs-vswitchd holds the userspace datapath "
                    "(make node-up, or a test session); stop it first")  # fmt: skip
    tmp = tmp_path_factory.mktemp("net")
    install_crds(kube_api, tmp)
    kubectl(kube_api, "apply", "-k", str(OVERLAY))
    for kind in ("daemonset", "deployment", "statefulset"):
        names = kubectl(kube_api, "-n", NS, "get", kind, "-o", "name").split()
        drop = [n for n in names if n.split("/")[1] not in NETWORK]
        if drop:
            kubectl(kube_api, "-n", NS, "delete", *drop)
    data = {"OVN_NB_DB": NB, "OVN_SB_DB": SB, "OVS_DATAPATH_TYPE": "netdev"}
    kubectl(kube_api, "-n", NS, "patch", "configmap", "k8shost-config", "--type=merge",
            "-p", json.dumps({"data": data}))  # fmt: skip
    links_before = _links()
    root = Path(str(tmp_path_factory.mktemp("node", numbered=True)))
    cni = CniConfig(CNI.conf_dir, CNI.bin_dirs, node_root=root / "host")
    runner, halt = start_runner(kube_api, root, cni=cni, sandbox_retry=1.0)
    try:
        wait_for(lambda: _ready(kube_api, dict.fromkeys(NETWORK, 1)), 90,
                 f"every container of {sorted(NETWORK)} Ready",
                 lambda: f"pods: {_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
        yield Booted(kube_api, runner, root / "host")
    finally:
        taps = _internal_ports(root / "host")
        halt()
        for dev in sorted((_links() - links_before) & taps):  # vswitchd leaves its userspace taps behind
            subprocess.run(["ip", "link", "del", dev], capture_output=True)
    left = sorted(_links() - links_before)
    assert not left, f"the network's teardown left links behind: {left}"


def test_network_containers_ready_through_their_probes(network: Booted) -> None:
    ps = _ready(network.api, dict.fromkeys(NETWORK, 1))
    assert ps is not None and len(ps) == len(NETWORK)
    for name, p in ps.items():
        statuses = p["status"]["containerStatuses"]
        assert p["status"]["phase"] == "Running" and all(s["ready"] for s in statuses), name
        assert len(statuses) == NETWORK[_app(name, NETWORK)], name
    # the init container wrote the plugin, the shim's modules and the conflist on the node
    conf = json.loads((network.root / "etc/cni/net.d/10-prismnet.conflist").read_text())
    assert conf["plugins"][0]["agentSocket"] == "/run/prismnet/cni.sock"
    assert (network.root / "opt/cni/bin/prismnet").stat().st_mode & 0o111
    assert (network.root / "opt/cni/lib/prismnet/cni/shim.py").is_file()
    # br-int on the userspace datapath, ovn-controller's chassis is the node
    assert network.vsctl("get", "Bridge", "br-int", "datapath_type") == "netdev"
    assert network.vsctl("get", "Open_vSwitch", ".", "external_ids:system-id").strip('"') == "node-1"
    sb = subprocess.run(["ovn-sbctl", f"--db={SB}", "--bare", "--columns=name", "list", "Chassis"],
                        capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert sb == ["node-1"]


def _in_pod(netns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, timeout=20)


def test_pods_on_the_containerized_network_reach_each_other(network: Booted, tmp_path: Path) -> None:
    apply_file(network.api, tmp_path, ECHO)
    ps = wait_for(lambda: _ready(network.api, {"echo": 2}), 45, "two echo pods Ready on PrismNET",
                  lambda: f"pods: {_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
    echo = [p for n, p in ps.items() if n.startswith("echo-")]
    cidr = ipaddress.ip_network(network.api.get("configmaps", NS, "k8shost-config")["data"]["CLUSTER_CIDR"])  # type: ignore[index]
    pods = []
    for p in echo:
        ip = p["status"]["podIP"]
        assert ipaddress.ip_address(ip) in cidr, ip
        sandbox = network.runner.pods[p["metadata"]["uid"]].sandbox
        assert sandbox is not None and sandbox.ip == ip
        host_if = sandbox.result["interfaces"][0]["name"]
        assert network.vsctl("get", "Interface", host_if, "external_ids:ovn-installed").strip('"') == "true"
        pods.append((sandbox.netns_name, ip))
    (a_ns, a_ip), (b_ns, b_ip) = pods
    assert a_ip != b_ip
    ping = _in_pod(a_ns, "ping", "-c", "2", "-W", "2", b_ip)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    for ns, ip in ((a_ns, b_ip), (b_ns, a_ip)):
        got = _in_pod(ns, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
                      f"http://{ip}:8080/")  # fmt: skip
        assert got.stdout == "200", got.stderr
