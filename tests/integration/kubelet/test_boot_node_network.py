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
from kubernetes import client, config

from nodeenv.fiberlb_routes import delete_host_routes, ensure_host_routes, pool_prefixes
from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.dns import ResolvConf
from nodeenv.kubelet.runner import Runner
from nodeenv.kubelet.sandbox import CniConfig
from nodeenv.ovn_pki import OvnPki
from nodeenv.ovn_stack import USERSPACE_DATAPATH_DEV
from tests.conftest import require_ovn
from tests.integration.kubeapi.test_kubeapi_kubectl import apply_file, kubectl
from tests.integration.kubeapi.test_kubeapi_overlay import OVERLAY, install_crds
from tests.integration.kubelet.conftest import NS, ovn_secrets, start_runner, wait_for
from tests.integration.kubelet.test_boot_fast import conditions
from tests.kubeapi_fixture import KubeApiHandle

pytestmark = pytest.mark.own_ovs

NETWORK = {
    "ovn-central": 4,  # nb, sb, northd and the RAFT exporter
    "ovs-node": 3,  # openvswitch, ovn-controller, ovn-log-rotate
    "prismnet-agent": 1,
    "fiberlb-controller": 1,
    "netpol-controller": 1,
}
"""The node's network workloads (and the controllers writing its load balancers and ACLs) and their
containers."""
SINGLE = ("fiberlb-controller", "netpol-controller")
"""Deployments of two host-network replicas: one node runs one (the second would stay Pending)."""
NB, SB = "ssl:127.0.0.1:6641", "ssl:127.0.0.1:6642"
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
CLIENTS = "".join(
    f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}{labels}}}}}
    spec:
      containers:
        - name: {name}
          image: registry.plasmacloud.io/k8shost:0.1.0
          command: [python3, -m, http.server, "8081"]
          readinessProbe: {{tcpSocket: {{port: 8081}}, periodSeconds: 1}}
"""
    for name, labels in (("client", ", access: granted"), ("stranger", ""))
)
"""Two pods to call from: `client` is the peer the NetworkPolicy allows, `stranger` is not."""
PODS = {"echo": 2, "client": 1, "stranger": 1}
CLUSTER_DNS = "10.96.0.10"
"""The overlay's cluster-dns Service, as kubelet's --cluster-dns."""
POOL = "192.168.100.0/24"
"""fiberlb-controller's --external-ip-pool in the manifest."""


@dataclass
class Booted:
    api: KubeApiHandle
    runner: Runner
    root: Path
    """The node's root (hostPaths)."""
    pki: Path
    """The OVN PKI the Secrets were made from (a client of the node's NB/SB needs a certificate)."""

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
    ovn_secrets(kube_api, tmp / "ovn-pki", ["127.0.0.1"])
    data = {"OVN_NB_DB": NB, "OVN_SB_DB": SB, "OVS_DATAPATH_TYPE": "netdev"}
    kubectl(kube_api, "-n", NS, "patch", "configmap", "k8shost-config", "--type=merge",
            "-p", json.dumps({"data": data}))  # fmt: skip
    for name in SINGLE:
        kubectl(kube_api, "-n", NS, "scale", "deployment", name, "--replicas=1")
    kubectl(kube_api, "-n", NS, "scale", "statefulset", "ovn-central", "--replicas=1")  # one node: one member
    links_before = _links()
    root = Path(str(tmp_path_factory.mktemp("node", numbered=True)))
    cni = CniConfig(CNI.conf_dir, CNI.bin_dirs, node_root=root / "host")
    runner, halt = start_runner(kube_api, root, cni=cni, sandbox_retry=1.0, cluster_dns=(CLUSTER_DNS,))
    try:
        wait_for(lambda: _ready(kube_api, dict.fromkeys(NETWORK, 1)), 90,
                 f"every container of {sorted(NETWORK)} Ready",
                 lambda: f"pods: {_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
        yield Booted(kube_api, runner, root / "host", tmp / "ovn-pki")
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
        if name.startswith("prismnet-agent-"):  # started beside ovs-node, it waited for OVS: no restart
            assert [c["restartCount"] for c in statuses] == [0], statuses
    # the init container wrote the plugin, the shim's modules and the conflist on the node
    conf = json.loads((network.root / "etc/cni/net.d/10-prismnet.conflist").read_text())
    assert conf["plugins"][0]["agentSocket"] == "/run/prismnet/cni.sock"
    assert (network.root / "opt/cni/bin/prismnet").stat().st_mode & 0o111
    assert (network.root / "opt/cni/lib/prismnet/cni/shim.py").is_file()
    # br-int on the userspace datapath, ovn-controller's chassis is the node
    assert network.vsctl("get", "Bridge", "br-int", "datapath_type") == "netdev"
    assert network.vsctl("get", "Open_vSwitch", ".", "external_ids:system-id").strip('"') == "node-1"
    admin = OvnPki(network.pki).issue("ovn-sbctl-test").ctl_flags()
    sb = subprocess.run(["ovn-sbctl", f"--db={SB}", *admin, "--bare", "--columns=name", "list", "Chassis"],
                        capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert sb == ["node-1"]


def _in_pod(netns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, timeout=20)


def http_code(netns: str | None, url: str, seconds: int = 5) -> str:
    """curl's HTTP status for `url` from the pod's netns (the node's for None); "000" when no answer."""
    argv = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", str(seconds), url]
    got = _in_pod(netns, *argv) if netns else subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return got.stdout or "000"


@dataclass
class RunnerPod:
    name: str
    ip: str
    netns: str
    host_if: str


@pytest.fixture(scope="module")
def pods(network: Booted, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[RunnerPod]]:
    """The echo pods and the two callers, Ready on PrismNET, by app."""
    apply_file(network.api, tmp_path_factory.mktemp("pods"), ECHO + CLIENTS)
    ps = wait_for(lambda: _ready(network.api, PODS), 60, f"pods {PODS} Ready on PrismNET",
                  lambda: f"pods: {_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
    out: dict[str, list[RunnerPod]] = {}
    for name, p in sorted(ps.items()):
        app = _app(name, PODS)
        if app in PODS:
            sandbox = network.runner.pods[p["metadata"]["uid"]].sandbox
            assert sandbox is not None and sandbox.ip == p["status"]["podIP"], name
            host_if = sandbox.result["interfaces"][0]["name"]
            out.setdefault(app, []).append(RunnerPod(name, sandbox.ip, sandbox.netns_name, host_if))
    return out


def test_pods_on_the_containerized_network_reach_each_other(
    network: Booted, pods: dict[str, list[RunnerPod]]
) -> None:
    cidr = ipaddress.ip_network(network.api.get("configmaps", NS, "k8shost-config")["data"]["CLUSTER_CIDR"])  # type: ignore[index]
    for p in pods["echo"]:
        assert ipaddress.ip_address(p.ip) in cidr, p
        assert network.vsctl("get", "Interface", p.host_if, "external_ids:ovn-installed").strip('"') == "true"
    a, b = pods["echo"]
    assert a.ip != b.ip
    ping = _in_pod(a.netns, "ping", "-c", "2", "-W", "2", b.ip)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    for src, dst in ((a, b), (b, a)):
        assert http_code(src.netns, f"http://{dst.ip}:8080/") == "200", (src.name, dst.name)


def _resolv_conf(network: Booted, app: str) -> str:
    """/etc/resolv.conf as the first container of `app`'s pod sees it."""
    rt = next(r for r in network.runner.pods.values() if r.pod["metadata"]["name"].startswith(app + "-"))
    cname = rt.cname(rt.pod["spec"]["containers"][0]["name"])
    got = network.runner.podman("exec", cname, "cat", "/etc/resolv.conf")
    assert got.returncode == 0, got.stderr
    return got.stdout


def test_pods_get_the_resolv_conf_kubelet_writes(network: Booted, pods: dict[str, list[RunnerPod]]) -> None:
    """dnsPolicy ClusterFirst (unset) on the pod network and ClusterFirstWithHostNet: the cluster DNS,
    kubelet's search path and ndots:5; ClusterFirst with hostNetwork: the node's own."""
    node = ResolvConf.parse(Path("/etc/resolv.conf").read_text())
    for app, ns in (("echo", "default"), ("fiberlb-controller", NS)):
        search = " ".join((f"{ns}.svc.cluster.local", "svc.cluster.local", "cluster.local", *node.searches))
        want = f"search {search}\nnameserver {CLUSTER_DNS}\noptions ndots:5\n"
        assert _resolv_conf(network, app) == want, app
    host = ResolvConf.parse(_resolv_conf(network, "ovs-node"))  # hostNetwork, no dnsPolicy
    assert host.nameservers == node.nameservers and CLUSTER_DNS not in host.nameservers


def _management_if(network: Booted) -> str:
    """The PrismNET management port prismnet-agent's container made on the node."""
    name = network.vsctl(
        "--bare", "--columns=name", "find", "Interface", "external_ids:prismnet.role=management"
    )
    assert name, "prismnet-agent made no management port"
    return name


def test_booted_fiberlb_gives_a_loadbalancer_service_an_ip_that_answers(
    network: Booted, pods: dict[str, list[RunnerPod]]
) -> None:
    """A user's LoadBalancer Service (the official client): the runner's EndpointSlice controller
    lists the echo pods, the booted fiberlb-controller allocates an IP from its pool, writes it to the
    Service's status and the OVN load balancer; HTTP to that IP answers from an echo pod, from a
    pod and from the node (routed to the pool through the management port, as node setup does)."""
    api = config.new_client_from_config(config_file=str(network.api.kubeconfig))
    core = client.CoreV1Api(api)
    port = client.V1ServicePort(name="http", port=80, target_port=8080)
    spec = client.V1ServiceSpec(type="LoadBalancer", selector={"app": "echo"}, ports=[port])
    core.create_namespaced_service(
        "default", client.V1Service(metadata=client.V1ObjectMeta(name="echo"), spec=spec)
    )

    def lb_ip() -> str | None:
        ingress = core.read_namespaced_service_status("echo", "default").status.load_balancer.ingress
        return ingress[0].ip if ingress else None

    vip = wait_for(lb_ip, 30, "fiberlb-controller's IP in the Service's status",
                   lambda: f"EndpointSlices: {network.api.objects('endpointslices', 'default')}")  # fmt: skip
    assert ipaddress.ip_address(vip) in ipaddress.ip_network(POOL), vip

    def endpoints() -> set[str]:
        return {e["addresses"][0] for sl in network.api.objects("endpointslices", "default")
                for e in sl["endpoints"] if e["conditions"]["ready"]}  # fmt: skip

    echo = {p.ip for p in pods["echo"]}
    wait_for(lambda: endpoints() == echo, 15, f"the echo Service's EndpointSlice listing {echo}",
             lambda: f"ready endpoints: {endpoints()}")  # fmt: skip
    caller = pods["client"][0]
    url = f"http://{vip}/"
    wait_for(lambda: http_code(caller.netns, url, 2) == "200", 30, f"{url} answering {caller.name}",
             lambda: f"got {http_code(caller.netns, url, 2)}")  # fmt: skip
    mgmt = _management_if(network)
    added = ensure_host_routes(pool_prefixes(POOL), mgmt)
    try:
        assert http_code(None, url) == "200", f"{url} from the node via {mgmt}"
    finally:
        delete_host_routes(added, mgmt)
    core.delete_namespaced_service("echo", "default")
    wait_for(lambda: http_code(caller.netns, url, 2) != "200", 30, f"{url} gone with the Service")


POLICY = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo-in, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
    - from: [{podSelector: {matchLabels: {access: granted}}}]
      ports: [{port: 8080}]
"""


def test_booted_netpol_controller_denies_what_a_networkpolicy_does_not_allow(
    network: Booted, pods: dict[str, list[RunnerPod]], tmp_path: Path
) -> None:
    """Before the policy both callers reach an echo pod; with it (kubectl apply) the booted
    netpol-controller's ACLs let `client` (access: granted) in and keep `stranger` out; deleted,
    `stranger` is let in again."""
    target = f"http://{pods['echo'][0].ip}:8080/"
    client_ns, stranger_ns = pods["client"][0].netns, pods["stranger"][0].netns
    assert (http_code(client_ns, target), http_code(stranger_ns, target)) == ("200", "200")
    apply_file(network.api, tmp_path, POLICY)
    wait_for(lambda: http_code(stranger_ns, target, 2) == "000", 30, f"{target} denied to stranger",
             lambda: f"stranger got {http_code(stranger_ns, target, 2)}")  # fmt: skip
    assert http_code(client_ns, target) == "200", "the allowed peer was denied too"
    assert http_code(pods["echo"][1].netns, target, 2) == "000", "an echo pod is no allowed peer"
    kubectl(network.api, "-n", "default", "delete", "networkpolicy", "echo-in")
    wait_for(lambda: http_code(stranger_ns, target, 2) == "200", 30, f"{target} allowed again to stranger")
