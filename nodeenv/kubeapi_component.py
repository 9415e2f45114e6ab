"""The Kubernetes API double in the node environment: `python -m nodeenv.kubeapi` on a free loopback
port, its dev PKI and kubeconfigs in the run dir.

node.env gains KUBECONFIG (the admin kubeconfig, for kubectl and the controllers), KUBE_API_URL
and KUBE_API_CA. A kubeconfig for another user: `KubeApiComponent(users=("system:serviceaccount:
kube-system:fiberlb-controller",))` writes `<run>/kubeapi/users/<name>.kubeconfig`.

`also_listen="NETNS=HOST:PORT"` serves the same API inside another network namespace too (a
cluster's underlay, where its nodes reach it; nodeenv/cluster/control.py): node.env then gains
NODES_KUBECONFIG (an admin kubeconfig naming that URL) and NODES_KUBE_API_URL.

`token_webhook=True` (node-up's, cluster mode's): bearer tokens go to the IAM webhook started before
it (WEBHOOK_KUBECONFIG, as kube-apiserver's `--authentication-token-webhook-config-file`), and RBAC is
enforced, so a minted IAM token is authorized as that user (the admin's static token still is admin).

node.env's KUBELET_PKI: the kubelet PKI (the double's kubelet client certificate, a serving
certificate for node `sandbox-kubelet` at 127.0.0.1) for a kubelet API the sandbox runs.

`durable=True`: its objects kept in `<run>/kubeapi/data` (`--data-dir`, nodeenv/kubeapi/durable.py)
and a fixed port, so the same command started again (a cold restart) serves the same API.

`audit_log=True` makes it write every request to `<run>/kubeapi/audit.log` as kube-apiserver's
`--audit-log-path` does (node.env: KUBE_AUDIT_LOG; read it with nodeenv/kubeapi/auditlog.py).
The AdminNetworkPolicy CRDs of daemonsets/policy/ are installed once it answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nodeenv.daemons import free_port, http_ready, start_foreground, wait_for
from nodeenv.kubelet.kubeletapi.pki import make_kubelet_pki
from nodeenv.node import Node

KUBELET_NODE = "sandbox-kubelet"
"""The node with a serving certificate in KUBELET_PKI (nodeenv/kubelet/kubeletapi/pki.py)."""


def kubelet_pki_dir(admin_kubeconfig: Path) -> Path:
    """Where the component made the kubelet PKI: beside the admin kubeconfig it wrote."""
    return admin_kubeconfig.parent / "kubelet-pki"


POLICY_CRDS = Path(__file__).parents[1] / "daemonsets" / "policy"


def install_policy_crds(kubeconfig: Path) -> None:
    """The AdminNetworkPolicy/BaselineAdminNetworkPolicy CRDs, as `kubectl apply -k daemonsets/...` installs
    them on a cluster (netpol-controller enforces ANPs only when the API serves them)."""
    files = [a for f in sorted(POLICY_CRDS.glob("policy.networking.k8s.io_*.yaml")) for a in ("-f", str(f))]
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "create", *files], check=True,
                   capture_output=True, timeout=60)  # fmt: skip


class KubeApiComponent:
    name = "kubeapi"

    def __init__(
        self,
        service_cidr: str = "10.96.0.0/16",
        users: tuple[str, ...] = (),
        also_listen: str = "",
        audit_log: bool = False,
        token_webhook: bool = False,
        durable: bool = False,
    ) -> None:
        self.service_cidr, self.users, self.also_listen = service_cidr, users, also_listen
        self.audit_log, self.token_webhook, self.durable = audit_log, token_webhook, durable

    def start(self, node: Node) -> dict[str, str]:
        kdir = node.path("kubeapi", "x").parent
        port_file = kdir / "ports.json"
        port_file.unlink(missing_ok=True)
        argv = [
            sys.executable, "-m", "nodeenv.kubeapi", "--dir", str(kdir), "--host", "127.0.0.1", "--port", "0",
            "--port-file", str(port_file), "--service-cidr", self.service_cidr,
            "--user", ",".join(self.users), "--also-listen", self.also_listen,
            "--audit-log-path", str(kdir / "audit.log") if self.audit_log else "",
        ]  # fmt: skip
        if self.durable:  # started again from the same argv, it finds its objects and its port
            argv += ["--data-dir", str(kdir / "data"), "--port", str(free_port())]
        kubelets = make_kubelet_pki(kdir / "kubelet-pki", [(KUBELET_NODE, "127.0.0.1")])
        argv += kubelets.apiserver_flags()  # for the kubelet API scenarios/kubectl_reach.py runs
        if self.token_webhook:
            argv += ["--authentication-token-webhook-config-file", node.endpoints["WEBHOOK_KUBECONFIG"],
                     "--enforce-rbac", "true"]  # fmt: skip
        # the daemon gets its whole configuration from argv, never from stray KUBEAPI_* variables
        env = {k: v for k, v in node.process_env().items() if not k.startswith("KUBEAPI_")}
        _, proc = start_foreground("kubeapi", argv, kdir / "kubeapi.log", env, node.daemons)
        wait_for(port_file.exists, "kubeapi port file", proc=proc)
        info = json.loads(port_file.read_text())
        ca = kdir / "pki" / "ca.crt"
        wait_for(lambda: http_ready(f"{info['url']}/readyz", ca), "kubeapi /readyz", proc=proc)
        out = {"KUBECONFIG": info["kubeconfig"], "KUBE_API_URL": info["url"], "KUBE_API_CA": str(ca),
               "KUBELET_PKI": str(kubelets.dir)}  # fmt: skip
        if self.audit_log:
            out["KUBE_AUDIT_LOG"] = str(kdir / "audit.log")
        for also in info.get("also", [])[:1]:
            out |= {"NODES_KUBECONFIG": also["kubeconfig"], "NODES_KUBE_API_URL": also["url"]}
        install_policy_crds(Path(info["kubeconfig"]))
        return out

    def cleanup(self, node: Node) -> None:
        """Everything lives in the run dir, which Node.down removes; the daemon is stopped by PID."""
