"""The admin's path on one machine, as commands (`make boot`, `make boot-down`): the API double as
the cluster, the overlay applied to it with kubectl, every workload booted from the image by the
runner, and everything removed again.

What `boot` does, in order (each step named in its output; a failed step stops it, and `down`
removes what was made):
1. checks: root, kubectl, podman, the image in the store (`make image`), no other userspace
   datapath on the machine (`ovs-netdev`: one per machine), not already booted;
2. a link `k8sh-api0` (one end of a veth pair) with --api-address/32, where the API double
   listens: the node reaches it directly and pods over PrismNET (their egress leaves through the
   management port to the node), standing in for the `kubernetes` Service kube-proxy would serve;
3. the API double (`python -m nodeenv.kubeapi`) on that address, its admin kubeconfig in the run dir,
   with k3s's PodSecurity configuration (daemonsets/k3s/pod-security.yaml: Baseline by default), and
   bearer tokens through the iam-webhook pod (at 127.0.0.1:3000 on the host network, the kubeconfig
   `iam-webhook gen-dev-pki` writes) as k3s's kube-apiserver (one node only: on N nodes the pod
   listens in a node's namespace, out of the double's reach);
4. as README "Install" has the admin do: the external-snapshotter CRDs, `kubectl apply -k <overlay>`,
   k8shost-config's OVN endpoints at this node (OVS's Python library resolves no host names in the
   image; ssl:, each component presenting its own certificate from Secret ovn-tls-<component>,
   made here from a new OVN CA) and OVS_DATAPATH_TYPE (netdev without the openvswitch kernel
   module), and the webhook's Secrets from `iam-webhook gen-dev-pki`, the Secret
   plasmacloud-credentials (PlasmaCloud's CA and the platform's IAM token, a DEVELOPMENT PKI:
   nodeenv/plasmacloud_auth.py); PlasmaCloud's LightningStor VolumeService (the faithful stand-in
   `python -m nodeenv.lightningstor`, TLS and IAM tokens only, loop devices on this machine) on the
   API's address, named in lightningstor-csi-config, so the CSI pods (their sidecars stood in for
   by the runner, nodeenv/kubelet/sidecars/) serve PVCs;
5. the runner (`python -m nodeenv.kubelet run`) detached, serving the kubelet API on 127.0.0.1:10250
   (its serving certificate and the API double's client certificate from `<run dir>/kubelet-pki`),
   hostPaths and the CNI dirs under `<run dir>/node`, the overlay's `cluster-dns` Service as kubelet's
   --cluster-dns (its ClusterIP is an OVN load balancer the booted fiberlb-controller programs, to
   flashdns-controller's pods);
   then the cluster's Prometheus (nodeenv/kubelet/monitoring.py: pods discovered through the API as
   the `prometheus` ServiceAccount, loopback only; `<run dir>/monitoring.json` says where);
6. waits until every scheduled pod whose containers are all booted is Ready (or --timeout), then
   prints `kubectl get pods -A -o wide`, the Ready counts and Prometheus's targets up.

Its state is `<run dir>/daemons.json` (the processes, by PID) and `boot.json` (the link). The node
roots and the pods' directories (where unix sockets are made) are reached through the run dir's short
alias (nodeenv/runtime_dir.py), whatever the checkout's depth.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv import ovn_tree
from nodeenv.cluster.underlay import list_netns
from nodeenv.daemons import DaemonError, DaemonTable, is_alive, start_foreground
from nodeenv.daemons import wait_for as wait_until
from nodeenv.image.build import image_name
from nodeenv.image.store import ImageStore
from nodeenv.kubeapi.snapshot_crds import snapshot_crds
from nodeenv.kubelet import monitoring
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.kubeletapi.pki import make_kubelet_pki
from nodeenv.kubelet.notbooted import not_booted
from nodeenv.ovn_pki import MANIFEST_IDENTITIES, manifest_pki, secret_args
from nodeenv.ovn_stack import USERSPACE_DATAPATH_DEV
from nodeenv.plasmacloud_auth import ensure_dev_pki
from nodeenv.runtime_dir import RUNTIME_DIR, link_run_dir, make_run_dir, short_path
from nodeenv.runtime_dir import remove_run_dir as remove_dir_and_alias

API_ADDRESS = "198.18.0.1"
"""RFC 2544's benchmarking range: nothing on a node uses it."""
API_LINK, API_PEER = "k8sh-api0", "k8sh-api1"
NS = "kube-system"
ROOT = Path(__file__).parents[2]
POD_SECURITY = ROOT / "daemonsets" / "k3s" / "pod-security.yaml"
"""kube-apiserver's --admission-control-config-file on k3s: the double enforces the same defaults"""
Obj = dict[str, Any]


class BootError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class BootSettings:
    run_dir: Path
    node_name: str
    api_address: str
    api_port: int
    overlay: Path
    datapath: str
    timeout: float
    nodes: int = 1
    """1: the machine's own namespace is the node; more: network namespaces (bootnodes.py)."""
    prefix: str = "k8shk"
    runtime_dir: Path = RUNTIME_DIR

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> BootSettings:
        ipaddress.IPv4Address(a.api_address)  # ValueError names it
        if a.datapath not in ("auto", "system", "netdev"):
            raise ValueError(f"--datapath must be auto, system or netdev, not {a.datapath!r}")
        if not str(a.nodes).isdigit() or int(a.nodes) < 1:
            raise ValueError(f"--nodes must be a number of nodes, 1 or more, not {a.nodes!r}")
        return cls(run_dir=Path(a.run_dir).resolve(), node_name=a.node_name, api_address=a.api_address,
                   api_port=int(a.api_port), overlay=Path(a.overlay).resolve(), datapath=a.datapath,
                   timeout=float(a.timeout), nodes=int(a.nodes), prefix=a.netns_prefix,
                   runtime_dir=Path(a.runtime_dir))  # fmt: skip

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kubeapi" / "admin.kubeconfig"

    @property
    def short_dir(self) -> Path:
        """The run dir by its short alias: node roots and pod directories, where sockets are made."""
        return short_path(self.run_dir, self.runtime_dir)

    @property
    def node_root(self) -> Path:
        return self.short_dir / "node"

    def make_run_dir(self) -> None:
        make_run_dir(self.run_dir, self.runtime_dir)

    def table(self) -> DaemonTable:
        return DaemonTable(self.run_dir / "daemons.json")


def say(msg: str) -> None:
    print(f"boot: {msg}", flush=True)


def kubectl(s: BootSettings, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", str(s.kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    if proc.returncode:
        raise BootError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def is_booted(s: BootSettings) -> bool:
    return any(is_alive(r) for r in s.table().load())


def preflight(s: BootSettings, env: Mapping[str, str]) -> list[str]:
    """What stops a boot, each with what to do about it."""
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root (network namespaces, OVS, mounts): run as root")
    for tool in ("kubectl", "podman", "ip"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} is not installed (run `make setup`)")
    if ovn_tree.missing():  # the host side's ovs-vsctl is the tree's (nodeenv/ovn_tree.py)
        problems.append(ovn_tree.missing())
    store, image = ImageStore.from_env(env), image_name()
    if shutil.which("podman") and not store.exists(image):
        problems.append(f"the image {image} is not in {store.base}: run `make image`")
    if s.nodes == 1 and Path(f"/sys/class/net/{USERSPACE_DATAPATH_DEV}").exists():
        why = "another ovs-vswitchd holds the userspace datapath (one per machine)"
        problems.append(
            f"{USERSPACE_DATAPATH_DEV} exists: {why}; make node-down, make boot-down, or a test session"
        )
    if is_booted(s):
        problems.append(f"already booted from {s.run_dir} (`make boot-down` first)")
    elif s.nodes > 1:
        left = list_netns(s.prefix)
        if left:
            why = f"a crashed boot with prefix {s.prefix!r}: `ip netns del` them, or another --netns-prefix"
            problems.append(f"network namespaces {', '.join(left)} exist ({why})")
    return problems


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode:
        raise BootError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def datapath(s: BootSettings) -> str:
    if s.datapath != "auto":
        return s.datapath
    return "system" if Path("/sys/module/openvswitch").exists() else "netdev"


def apply_overlay(s: BootSettings, work: Path, servers: list[str]) -> None:
    """README "Install" steps 2-4 against the API double, in the order that leaves no workload
    waiting on a missing object (runners may already watch the API): the snapshot CRDs, the
    webhook's Secrets, then the overlay through an admin's overlay on top of it (`<work>/overlay`)
    setting k8shost-config's OVN endpoints at `servers` (the control-plane nodes' addresses, where
    ovn-central's members listen) and OVS_DATAPATH_TYPE, as README "Installing on k3s" step 2
    has the admin edit them in an overlay."""
    crds = work / "snapshot-crds.yaml"
    crds.write_text(yaml.safe_dump_all(snapshot_crds()))
    kubectl(s, "apply", "-f", str(crds))
    webhook_secrets(s, work / "webhook-pki")
    plasmacloud_secret(s)
    ovn_secrets(s, work / "ovn-pki", servers)
    data = {
        "OVN_NB_DB": ",".join(f"ssl:{a}:6641" for a in servers),
        "OVN_SB_DB": ",".join(f"ssl:{a}:6642" for a in servers),
        "OVS_DATAPATH_TYPE": datapath(s),
    }
    kubectl(s, "apply", "-k", str(admin_overlay(s, work / "overlay", data)))
    say(f"k8shost-config: {data}")


def admin_overlay(s: BootSettings, d: Path, config: dict[str, str]) -> Path:
    """A kustomization over --overlay that sets k8shost-config's `config` keys."""
    d.mkdir(parents=True, exist_ok=True)
    patch = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "k8shost-config", "namespace": NS},
             "data": config}  # fmt: skip
    doc = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
           "resources": [os.path.relpath(s.overlay, d)],
           "patches": [{"patch": yaml.safe_dump(patch)}]}  # fmt: skip
    (d / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return d


def ovn_secrets(s: BootSettings, directory: Path, servers: list[str]) -> None:
    """README "Installing on k3s": the cluster's OVN CA and a certificate per component, each as
    Secret ovn-tls-<component> (nodeenv/ovn_pki.py; made once, kept in the run dir)."""
    pki = manifest_pki(directory, servers)
    for identity in MANIFEST_IDENTITIES:
        kubectl(s, "-n", NS, *secret_args(pki, identity))


def webhook_pki(pki: Path) -> dict[str, str]:
    """`iam-webhook gen-dev-pki` once (README "Install" step 4): the webhook's certificates, the
    kubeconfig kube-apiserver (here the API double) names it with, at https://127.0.0.1:3000, where
    the iam-webhook pod listens on the host network."""
    if (pki / "files.json").exists():
        files: dict[str, str] = json.loads((pki / "files.json").read_text())
        return files
    url = "https://127.0.0.1:3000/apis/iam.plasmacloud.io/v1/authenticate"
    webhook = Path(sys.executable).parent / "iam-webhook"
    proc = subprocess.run([str(webhook), "gen-dev-pki", "--out", str(pki), "--server-name", "127.0.0.1",
                           "--url", url], capture_output=True, text=True)  # fmt: skip
    if proc.returncode:
        raise BootError(f"iam-webhook gen-dev-pki: {proc.stderr.strip()}")
    (pki / "files.json").write_text(proc.stdout)
    files = json.loads(proc.stdout)
    return files


def webhook_secrets(s: BootSettings, pki: Path) -> None:
    """README "Install" step 4: the objects made from `iam-webhook gen-dev-pki`."""
    files = webhook_pki(pki)
    kubectl(s, "-n", NS, "create", "secret", "tls", "iam-webhook-tls", f"--cert={pki / 'server.crt'}",
            f"--key={pki / 'server.key'}")  # fmt: skip
    kubectl(
        s, "-n", NS, "create", "secret", "generic", "iam-webhook-client-ca", f"--from-file={pki / 'ca.crt'}"
    )
    kubectl(
        s, "-n", NS, "create", "configmap", "iam-webhook-keys", f"--from-file=keys.pem={files['signing_pub']}"
    )


SERVER_NAME = "lightningstor.plasmacloud.internal"


def plasmacloud_secret(s: BootSettings) -> None:
    """PlasmaCloud's CA and the platform's IAM token as the Secret the CSI pods, the controllers and
    the agents mount (daemonsets/csi/config.yaml), from this boot's DEVELOPMENT PlasmaCloud PKI."""
    pki = ensure_dev_pki(s.run_dir / "plasmacloud-pki")
    kubectl(s, "-n", NS, "create", "secret", "generic", "plasmacloud-credentials",
            f"--from-file=ca.crt={pki.ca}", f"--from-file=token={pki.token}")  # fmt: skip


def boot(s: BootSettings, env: Mapping[str, str]) -> int:
    problems = preflight(s, env)
    if problems:
        for p in problems:
            print(f"boot: cannot start: {p}", file=sys.stderr)
        return 1
    started, tick = time.monotonic(), None
    try:
        if s.nodes == 1:
            _start(s, env)
        else:
            from nodeenv.kubelet import bootnodes  # it builds on this module

            tick = bootnodes.host_setup(bootnodes.start(s, env), bootnodes.service_cidr(s))
    except (BootError, DaemonError, OSError) as e:
        print(f"boot: failed: {e}\nboot: logs in {s.run_dir}; `make boot-down` removes what was made",
              file=sys.stderr)  # fmt: skip
        return 1
    pods = wait_ready(s, tick)
    print(kubectl(s, "get", "pods", "-A", "-o", "wide"), end="")
    print(summary(pods))
    print(monitoring.await_targets(s.run_dir, 60))
    took = time.monotonic() - started
    say(f"took {took:.0f} s; kubectl --kubeconfig {s.kubeconfig}; `make boot-down` stops it")
    return 0 if not waiting_for(pods) else 1


def _start(s: BootSettings, env: Mapping[str, str]) -> None:
    s.make_run_dir()
    (s.run_dir / "boot.json").write_text(json.dumps({"link": API_LINK, "address": s.api_address}))
    if not Path(f"/sys/class/net/{API_LINK}").exists():
        # a veth pair, not a dummy link: kernels without the dummy module (containers) have veth
        _ip("link", "add", API_LINK, "type", "veth", "peer", "name", API_PEER)
    _ip("addr", "replace", f"{s.api_address}/32", "dev", API_LINK)
    for dev in (API_LINK, API_PEER):
        _ip("link", "set", dev, "up")
    say(f"{API_LINK} {s.api_address}/32: the API's address")
    py, table = sys.executable, s.table()
    port_file = s.run_dir / "kubeapi.json"
    port_file.unlink(missing_ok=True)
    # as k3s's kube-apiserver (daemonsets/k3s/config.yaml): IAM tokens through the iam-webhook pod
    hook = webhook_pki(s.run_dir / "webhook-pki")["kubeconfig"]
    kubelets = make_kubelet_pki(s.run_dir / "kubelet-pki", [(s.node_name, "127.0.0.1")])
    argv = [py, "-m", "nodeenv.kubeapi", "--dir", str(s.run_dir / "kubeapi"), "--host", s.api_address,
            "--port", str(s.api_port), "--port-file", str(port_file),
            "--admission-control-config-file", str(POD_SECURITY),
            "--authentication-token-webhook-config-file", hook, *kubelets.apiserver_flags()]  # fmt: skip
    _, proc = start_foreground(
        "kubeapi", argv, s.run_dir / "kubeapi.log", {**env, "PYTHONPATH": str(ROOT)}, table
    )
    wait_until(port_file.exists, "the API double", 30, proc)
    say(f"API double at {json.loads(port_file.read_text())['url']} (log {s.run_dir / 'kubeapi.log'})")
    apply_overlay(s, s.run_dir, ["127.0.0.1"])
    say(f"applied {s.overlay} with kubectl")
    start_volume_service(s, env, s.api_address, [s.node_name])
    start_monitoring(s, json.loads(port_file.read_text())["url"])
    dns = kubectl(s, "-n", NS, "get", "service", "cluster-dns", "-o", "jsonpath={.spec.clusterIP}").strip()
    argv = [py, "-m", "nodeenv.kubelet", "run", "--kubeconfig", str(s.kubeconfig), "--node-name", s.node_name,
            "--node-root", str(s.node_root), "--state-dir", str(s.short_dir / "pods"),
            "--cluster-dns", dns, *kubelets.kubelet_flags(s.node_name)]  # fmt: skip
    start_foreground("kubelet", argv, s.run_dir / "kubelet.log", {**env, "PYTHONPATH": str(ROOT)}, table)
    say(f"runner started for {s.node_name}, cluster DNS {dns} (log {s.run_dir / 'kubelet.log'})")


def start_monitoring(s: BootSettings, api_url: str, netns: str = "") -> None:
    """Prometheus discovering the pods through the API at `api_url` (nodeenv/kubelet/monitoring.py)."""
    client = KubeClient.from_kubeconfig(s.kubeconfig)
    api = monitoring.start(s.run_dir, s.table(), client, api_url, s.run_dir / "kubeapi/pki/ca.crt", netns)
    where = f" in {netns}" if netns else ""
    say(f"Prometheus at {api.url}{where} (logs {s.run_dir}/prometheus.log, vmagent.log)")


def start_volume_service(s: BootSettings, env: Mapping[str, str], host: str, nodes: list[str],
                         netns: str = "") -> None:  # fmt: skip
    """LightningStor's VolumeService on `host` (in `netns`, the underlay's on N nodes), where pods and
    nodes reach it, named in the CSI config."""
    port_file = s.run_dir / "lightningstor.json"
    port_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "nodeenv.lightningstor", "--root",
            str(s.run_dir / "lightningstor"), "--host", host, "--nodes", ",".join(nodes),
            "--port-file", str(port_file), "--pki", str(s.run_dir / "plasmacloud-pki")]  # fmt: skip
    py_env = {**env, "PYTHONPATH": str(ROOT)}
    _, proc = start_foreground("lightningstor", argv, s.run_dir / "lightningstor.log", py_env, s.table(),
                               netns, host_mounts=True)  # fmt: skip
    wait_until(port_file.exists, "the LightningStor VolumeService", 30, proc)
    endpoint = json.loads(port_file.read_text())["endpoint"]
    # the pods dial an address; the service's certificate names lightningstor.plasmacloud.internal
    patch = json.dumps({"data": {"LIGHTNINGSTOR_ENDPOINT": endpoint, "PLASMACLOUD_SERVER_NAME": SERVER_NAME}})
    kubectl(s, "-n", NS, "patch", "configmap", "lightningstor-csi-config", "--type=merge", "-p", patch)
    say(f"LightningStor VolumeService at {endpoint} (log {s.run_dir / 'lightningstor.log'})")


def _ready(p: Obj) -> bool:
    conds = (p.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def waiting_for(pods: list[Obj]) -> list[str]:
    """Scheduled pods whose containers are all booted but that are not Ready (yet)."""
    return [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pods
        if p["spec"].get("nodeName")
        and not _ready(p)
        and not any(not_booted(c.get("image", "")) for c in p["spec"]["containers"])
    ]


def _owned_by(pod: Obj, kind: str, name: str) -> bool:
    return any(
        r.get("kind") == kind and r.get("name") == name for r in pod["metadata"].get("ownerReferences") or []
    )


def _unschedulable(p: Obj) -> bool:
    """Left Pending by the scheduler (PodScheduled False, Unschedulable), not merely not scheduled yet."""
    conds = (p.get("status") or {}).get("conditions") or []
    return not p["spec"].get("nodeName") and any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conds
    )


def members_due(statefulsets: list[Obj], pods: list[Obj]) -> list[str]:
    """StatefulSets whose members are still to come: fewer scheduled members than replicas, none of
    them Unschedulable (OrderedReady creates one once the one before is Ready). A member created but
    not scheduled yet is still to come: counting it as stuck once ended a boot with ovn-central-2
    0/4 Pending."""
    out = []
    for sts in statefulsets:
        name, ns = sts["metadata"]["name"], sts["metadata"]["namespace"]
        mine = [p for p in pods if p["metadata"]["namespace"] == ns and _owned_by(p, "StatefulSet", name)]
        scheduled = [p for p in mine if p["spec"].get("nodeName")]
        stuck = any(_unschedulable(p) for p in mine)
        if len(scheduled) < int(sts["spec"].get("replicas", 1)) and not stuck:
            out.append(f"{ns}/{name}")
    return out


def wait_ready(s: BootSettings, tick: Callable[[], bool] | None = None) -> list[Obj]:
    """The pods, once every scheduled one whose containers are all booted is Ready and every
    StatefulSet has its members (or at the timeout); `tick` runs every round meanwhile and says
    whether it is done too (the nodes' host setup)."""
    client = KubeClient.from_kubeconfig(s.kubeconfig)
    deadline, pods = time.monotonic() + s.timeout, []
    while time.monotonic() < deadline:
        ticked = tick() if tick is not None else True
        pods = client.list("/api/v1", "pods")
        if (
            pods
            and ticked
            and not waiting_for(pods)
            and not members_due(client.list("/apis/apps/v1", "statefulsets"), pods)
        ):
            break
        time.sleep(1 if tick else 2)
    return pods


def summary(pods: list[Obj]) -> str:
    ready = [p for p in pods if _ready(p)]
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    partial = [p for p in pods if any(not_booted(c.get("image", "")) for c in p["spec"]["containers"])]
    lines = [f"Ready: {len(ready)}/{len(pods)} pods"]
    nodes = sorted({p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")})
    if len(nodes) > 1:
        per = [(n, [p for p in pods if p["spec"].get("nodeName") == n]) for n in nodes]
        lines.append("per node: " + ", ".join(f"{n} {sum(map(_ready, on))}/{len(on)}" for n, on in per))
    if pending:
        lines.append(f"Pending (Unschedulable: host ports or anti-affinity): {len(pending)}")
    if partial:
        names = ", ".join(sorted(p["metadata"]["name"] for p in partial))
        lines.append(f"with containers not booted (README 'Not booted'): {names}")
    late = waiting_for(pods)
    if late:
        lines.append(f"not Ready: {', '.join(late)} (see kubectl describe / the runner's log)")
    return "\n".join(lines)


def status(s: BootSettings) -> int:
    if not is_booted(s):
        print(f"not booted (nothing running from {s.run_dir})")
        return 1
    print(kubectl(s, "get", "pods", "-A", "-o", "wide"), end="")
    print(summary(KubeClient.from_kubeconfig(s.kubeconfig).list("/api/v1", "pods")))
    return 0


def _node_internal_ports(s: BootSettings) -> set[str]:
    """The userspace datapath's taps the node's ovs-vswitchd made (it leaves them behind when it stops)."""
    db = s.node_root / "run/openvswitch/db.sock"
    if not db.exists():
        return set()
    argv = ["ovs-vsctl", f"--db=unix:{db}", "--timeout=5", "--bare", "--columns=name", "find", "Interface",
            "type=internal"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    return {USERSPACE_DATAPATH_DEV, *out.split()}


def _mounts_below(path: Path) -> list[str]:
    prefix = os.path.realpath(path) + "/"  # the mount table names real paths
    return [
        m.split()[1]
        for m in Path("/proc/self/mounts").read_text().splitlines()
        if m.split()[1].startswith(prefix)
    ]


def remove_run_dir(s: BootSettings) -> bool:
    """The run dir removed, unless something is still mounted below it (then named)."""
    left = _mounts_below(s.run_dir)
    if left:
        print(
            f"boot-down: mounts left below {s.run_dir}, not removing it: {', '.join(left)}", file=sys.stderr
        )
        return False
    shutil.rmtree(s.run_dir)
    remove_dir_and_alias(s.run_dir, s.runtime_dir)  # the alias
    return True


def down(s: BootSettings) -> int:
    if not s.run_dir.exists():
        print(f"boot-down: nothing to stop ({s.run_dir} does not exist)")
        return 0
    link_run_dir(s.run_dir, s.runtime_dir)  # lost with /run (a reboot)
    booted = json.loads((s.run_dir / "boot.json").read_text()) if (s.run_dir / "boot.json").exists() else {}
    if booted.get("nodes", 1) > 1:
        from nodeenv.kubelet import bootnodes  # it builds on this module

        return bootnodes.down(s, booted["prefix"], booted["nodes"])
    taps = _node_internal_ports(s)
    stopped = s.table().stop_all(timeout=120)  # the runner first: it stops pods, then the API goes
    links = {p.name for p in Path("/sys/class/net").iterdir()}
    for dev in sorted(taps & links) + ([API_LINK] if API_LINK in links else []):  # its peer goes with it
        subprocess.run(["ip", "link", "del", dev], capture_output=True)
    if not remove_run_dir(s):
        return 1
    print(f"boot-down: stopped {', '.join(stopped) or 'nothing'}; removed {API_LINK}, {len(taps & links)} "
          f"datapath links and {s.run_dir}")  # fmt: skip
    return 0
