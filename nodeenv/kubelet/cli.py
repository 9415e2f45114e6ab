"""python -m nodeenv.kubelet: the kubelet-like runner, and the newcomer's path built on it.

  run     the runner in the foreground against a cluster's API (--kubeconfig): registers the Node,
          plays the workload controllers and the scheduler (--controllers) and kubelet for it, in
          the node's network namespace (--netns), until SIGTERM/SIGINT (then stops every
          container and pod sandbox it started); SIGUSR1 drains it first (stops its pod-network
          pods, keeps its host-network ones until SIGTERM)
  boot    the admin's path on this machine (`make boot`) on --nodes nodes (network namespaces on
          an underlay; 1: this namespace, the API double on --api-address): the snapshot CRDs and
          `kubectl apply -k <overlay>`, the k8shost-config values this machine needs and the
          webhook's dev Secrets, then a `run` per node detached; waits until the pods are Ready
          and prints `kubectl get pods -A -o wide` with the Ready counts
  down    stop what `boot` started (by PID), remove its links, mounts and run dir (`make boot-down`)
  status  the pods and Ready counts of a booted node
  powerloss  a power cut of a booted cluster (--nodes 2+): every process of its machines SIGKILLed
          at once, their namespaces, mounts and /run gone, the disks under the run dir kept
  resume  boot that cluster again from the run dir its disks kept (the API's objects, OVN's RAFT
          files, the nodes' OVS databases); the runners start every pod again; waits as boot does

Every flag has an environment fallback (shown in --help).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from common.jsonlog import setup_logging
from nodeenv import netns_socket, ovn_tree
from nodeenv.image.store import ImageStore
from nodeenv.kubelet import boot
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.kubeletapi.server import KubeletApiServer, KubeletApiSettings
from nodeenv.kubelet.runner import Runner, RunnerSettings
from nodeenv.kubelet.sandbox import CniConfig

log = logging.getLogger("nodeenv.kubelet")
COMMANDS = ("run", "boot", "down", "status", "powerloss", "resume")
_FLAGS = (  # flag, env, default, help
    ("--run-dir", "K8SHOST_BOOT_DIR", ".run-boot", "boot/down/status: run dir (state, logs, node root)"),
    ("--runtime-dir", "K8SHOST_RUNTIME_DIR", "/run/k8shost",
     "boot/down/status: where the run dir's short alias is made (the node roots and pod dirs, their "
     "unix sockets, are reached through it)"),
    ("--kubeconfig", "KUBECONFIG", "", "run: the cluster's kubeconfig (server, CA, token)"),
    ("--node-name", "K8SHOST_NODE_NAME", "node-1", "the Node this runner is"),
    ("--node-ip", "K8SHOST_NODE_IP", "127.0.0.1", "run: the Node's InternalIP (hostNetwork pods' podIP)"),
    ("--node-root", "K8SHOST_NODE_ROOT", "", "run: hostPath volumes and the CNI dirs live under it"),
    ("--state-dir", "K8SHOST_POD_STATE_DIR", "", "run: pod directories (volumes)"),
    ("--cni-conf-dir", "K8SHOST_CNI_CONF_DIR", "/etc/cni/net.d", "run: CNI conf dir (under the node root)"),
    ("--cni-bin-dirs", "K8SHOST_CNI_BIN_DIRS", "/opt/cni/bin,/usr/lib/cni", "run: CNI plugin dirs"),
    ("--cluster-dns", "K8SHOST_CLUSTER_DNS", "",
     "run: kubelet's --cluster-dns, comma-separated (none: pods get the node's resolv.conf)"),
    ("--cluster-domain", "K8SHOST_CLUSTER_DOMAIN", "cluster.local", "run: kubelet's --cluster-domain"),
    ("--netns", "K8SHOST_NODE_NETNS", "",
     "run: the node's network namespace (/run/netns/NAME), entered at start: its pods' host network, "
     "where probes and CNI calls go from (none: this one)"),
    ("--node-labels", "K8SHOST_NODE_LABELS",
     "node-role.kubernetes.io/control-plane=true,node-role.kubernetes.io/master=true",
     "run: the Node's labels, k=v,... (kubelet's --node-labels; a single k3s server's by default)"),
    ("--tls-cert-file", "K8SHOST_KUBELET_TLS_CERT", "",
     "run: the kubelet serving certificate; set: the kubelet API is served on --node-ip (none: not served)"),
    ("--tls-private-key-file", "K8SHOST_KUBELET_TLS_KEY", "", "run: its key"),
    ("--client-ca-file", "K8SHOST_KUBELET_CLIENT_CA", "",
     "run: the CA of the client certificates the kubelet API accepts (the API server's)"),
    ("--kubelet-port", "K8SHOST_KUBELET_PORT", "10250", "run: the kubelet API's port"),
    ("--controllers", "K8SHOST_RUN_CONTROLLERS", "true",
     "run: also play kube-controller-manager and the scheduler (true/false; one runner of a cluster)"),
    ("--nodes", "K8SHOST_NODES", "3",
     "boot: nodes, each a network namespace on an underlay (1: the machine's own namespace is the node)"),
    ("--netns-prefix", "K8SHOST_BOOT_PREFIX", "k8shk", "boot, 2+ nodes: the nodes' namespaces' prefix"),
    ("--api-address", "K8SHOST_BOOT_API_ADDRESS", boot.API_ADDRESS,
     "boot: the API double's address, on the link k8sh-api0 (pods reach it over PrismNET)"),
    ("--api-port", "K8SHOST_BOOT_API_PORT", "6443", "boot: the API double's HTTPS port"),
    ("--overlay", "K8SHOST_OVERLAY", "daemonsets/overlays/k3s", "boot: what `kubectl apply -k` applies"),
    ("--datapath", "K8SHOST_OVS_DATAPATH", "auto",
     "boot: OVS_DATAPATH_TYPE for br-int (system, netdev; auto: netdev without the openvswitch module)"),
    ("--timeout", "K8SHOST_BOOT_TIMEOUT", "240", "boot: seconds to wait for the pods to be Ready"),
    ("--log-level", "K8SHOST_LOG_LEVEL", "info", "log level"),
)  # fmt: skip


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nodeenv.kubelet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("command", choices=COMMANDS)
    for flag, var, default, text in _FLAGS:
        p.add_argument(flag, default=env.get(var, default), help=f"{text} (env {var}; default {default!r})")
    return p


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """The runner in the foreground until SIGTERM/SIGINT."""
    if not args.kubeconfig or not args.node_root or not args.state_dir:
        print("run: --kubeconfig, --node-root and --state-dir are required", file=sys.stderr)
        return 2
    if why := ovn_tree.missing():
        print(f"run: {why}", file=sys.stderr)
        return 1
    if args.netns:
        try:
            netns_socket.enter(args.netns)  # before any thread: all of them, and podman, run there
        except OSError as e:
            print(f"run: --netns: {e}", file=sys.stderr)
            return 1
    root = Path(args.node_root).absolute()  # not resolved: a short alias stays short (sockets below)
    try:
        labels = dict(kv.split("=", 1) for kv in args.node_labels.split(",") if kv)
    except ValueError:
        print(f"run: --node-labels: k=v,... expected, not {args.node_labels!r}", file=sys.stderr)
        return 2
    store = ImageStore.from_env(env)
    cni = CniConfig(Path(args.cni_conf_dir), tuple(args.cni_bin_dirs.split(",")), node_root=root)
    settings = RunnerSettings(node_name=args.node_name, node_ip=args.node_ip, node_root=root,
                              state_dir=Path(args.state_dir).absolute(), cni=cni,
                              cluster_dns=tuple(a for a in args.cluster_dns.split(",") if a),
                              cluster_domain=args.cluster_domain, labels=labels,
                              controllers=args.controllers.lower() in ("1", "true", "yes"),
                              kubelet_port=int(args.kubelet_port) if args.tls_cert_file else 0,
                              podman_env={"HOME": env.get("HOME", "/root"), "PATH": env.get("PATH", ""),
                                          **store.env()})  # fmt: skip
    runner = Runner(settings, KubeClient.from_kubeconfig(Path(args.kubeconfig)))
    log.info("node labels %s; controllers %s", dict(settings.labels), settings.controllers)
    stop, term, drain = threading.Event(), threading.Event(), threading.Event()

    def on_signal(signum: int, _: object) -> None:
        (drain if signum == signal.SIGUSR1 else term).set()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, on_signal)
    log.info("runner for node %s: hostPaths under %s, API %s", args.node_name, root, runner.client.server)
    api = kubelet_api(args, runner, settings)
    try:
        runner.run(stop)
        if drain.is_set() and not term.is_set():  # a cluster's `down`: pod-network pods everywhere first
            log.info("draining: every pod-network pod stopped; host-network ones wait for SIGTERM")
            runner.drain()
            log.info("drained")
            term.wait()
    finally:
        log.info("stopping: every pod's containers, then its sandbox")
        if api is not None:
            api.stop()
        runner.shutdown()
    return 0


def kubelet_api(args: argparse.Namespace, runner: Runner, s: RunnerSettings) -> KubeletApiServer | None:
    """The kubelet API on the node's address, started (when --tls-cert-file is given)."""
    if not args.tls_cert_file:
        return None
    api = KubeletApiServer(runner, KubeletApiSettings(
        address=s.node_ip, port=s.kubelet_port, cert=Path(args.tls_cert_file),
        key=Path(args.tls_private_key_file), client_ca=Path(args.client_ca_file), podman_env=s.podman_env,
    ))  # fmt: skip
    api.start()
    return api


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    args = build_parser(env).parse_args(sys.argv[1:] if argv is None else list(argv))
    setup_logging(args.log_level, json_format=False)
    # The OVN tree's programs (the host side's ovs-vsctl) first in PATH (nodeenv/ovn_tree.py); boot's
    # preflight, run and resume require it, down and status run without it.
    ovn_tree.activate(required=False)
    if args.command == "run":
        return run(args, env)
    try:
        settings = boot.BootSettings.from_args(args)
    except ValueError as e:
        print(f"{args.command}: {e}", file=sys.stderr)
        return 2
    if args.command == "boot":
        return boot.boot(settings, env)
    if args.command == "down":
        return boot.down(settings)
    if args.command in ("powerloss", "resume"):
        from nodeenv.kubelet import powerloss

        if args.command == "powerloss":
            return powerloss.main(settings)
        return powerloss.resume_main(settings, env)
    return boot.status(settings)
