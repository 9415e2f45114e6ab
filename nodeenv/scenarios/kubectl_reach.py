"""kubectl logs and kubectl exec on a pod of the sandbox. The sandbox's own pods are network
namespaces the CNI wires (and one podman container): no kubelet runs them. So this part adds the
one `make boot` uses -- the runner (nodeenv/kubelet) with its kubelet API -- as a node of its own,
`sandbox-kubelet`, in this machine's namespace: its kubelet API on 127.0.0.1 with the serving
certificate and the API double's client certificate the kubeapi component made (beside the admin
kubeconfig: a cluster's env names only that). A host-network pod of a busybox image runs there;
kubectl logs and exec reach it through the double's pods/log and pods/exec, the exit code comes
back, and the kubelet API refuses a caller without the API server's certificate (401)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from nodeenv.kubeapi_component import kubelet_pki_dir
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.kubeletapi.pki import KubeletPki
from nodeenv.kubelet.kubeletapi.server import KubeletApiServer, KubeletApiSettings
from nodeenv.kubelet.runner import Runner, RunnerSettings
from nodeenv.podman_runtime import IMAGE, make_podman
from nodeenv.scenario import Scenario
from nodeenv.scenarios import kubelet_metrics

NODE, NS, POD = "sandbox-kubelet", "sandbox-reach", "reach"


def _kubectl(scn: Scenario, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=20s", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=40)


def _ok(scn: Scenario, *args: str, stdin: str | None = None) -> str:
    proc = _kubectl(scn, *args, stdin=stdin)
    if proc.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pod() -> str:
    container = {"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                 "command": ["sh", "-c", f"echo hello from {POD}; sleep 600"]}  # fmt: skip
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": NS},
                       "spec": {"nodeName": NODE, "hostNetwork": True, "containers": [container],
                                "terminationGracePeriodSeconds": 1}})  # fmt: skip


def _start_node(scn: Scenario, pki: KubeletPki) -> tuple[int, Callable[[], None]]:
    """The runner for NODE (kubelet only, no controllers) and its kubelet API: its port, and what
    removes them, the Node and the namespace (idempotent; deferred too, should a step fail first)."""
    base = scn.node.run_dir / "kubectl-reach"
    pm = make_podman(base / "podman", scn.at(1).install_root, f"/k8shost-sbx-reach-{os.getpid()}")
    scn.defer(pm.remove_all)
    pm.build_image()
    port = _free_port()
    settings = RunnerSettings(node_name=NODE, node_root=base / "root", state_dir=base / "pods",
                              podman_env=pm.env, labels={}, controllers=False, kubelet_port=port)  # fmt: skip
    runner = Runner(settings, KubeClient.from_kubeconfig(Path(scn.env["KUBECONFIG"])))
    cert, key = pki.serving(NODE)
    serving = KubeletApiSettings(address="127.0.0.1", port=port, cert=cert, key=key, client_ca=pki.client_ca,
                                 podman_env=pm.env)  # fmt: skip
    api = KubeletApiServer(runner, serving)
    api.start()
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), name="sandbox-kubelet", daemon=True)
    thread.start()

    def halt() -> None:
        if stop.is_set():
            return
        _kubectl(scn, "delete", "namespace", NS, "--wait=false")
        stop.set()
        thread.join(30)
        runner.shutdown()
        api.stop()
        _kubectl(scn, "delete", "node", NODE)

    scn.defer(halt)
    return port, halt


def _wait_running(scn: Scenario) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = json.loads(_ok(scn, "-n", NS, "get", "pod", POD, "-o", "json"))
        if any("running" in s.get("state", {}) for s in pod.get("status", {}).get("containerStatuses", [])):
            return
        time.sleep(1)
    raise RuntimeError(f"pod {POD} not running after 60 s: {pod.get('status')}")


def run(scn: Scenario) -> None:
    pki = KubeletPki(kubelet_pki_dir(Path(scn.env["KUBECONFIG"])))
    with scn.step(f"kubectl reach: a runner and its kubelet API as node {NODE}, a pod on it"):
        port, halt = _start_node(scn, pki)
        _ok(scn, "create", "namespace", NS)
        _ok(scn, "apply", "-f", "-", stdin=_pod())
        _wait_running(scn)
    try:
        _reach(scn, pki, port)
        kubelet_metrics.run_on(scn, pki, NODE, port)  # kubectl top on this node, while it runs
    finally:  # gone before the later parts, which would otherwise see a Node of its own
        halt()


def _reach(scn: Scenario, pki: KubeletPki, port: int) -> None:
    with scn.step("kubectl reach: kubectl logs"):
        out = _ok(scn, "-n", NS, "logs", POD)
        if out != f"hello from {POD}\n":
            raise RuntimeError(f"kubectl logs {POD}: {out!r}")
    with scn.step("kubectl reach: kubectl exec, exit code 3 back as kubectl's"):
        proc = _kubectl(scn, "-n", NS, "exec", POD, "--", "sh", "-c", "echo in the pod; exit 3")
        if (proc.returncode, proc.stdout) != (3, "in the pod\n"):
            raise RuntimeError(f"kubectl exec: exit {proc.returncode}, {proc.stdout!r} {proc.stderr!r}")
    with scn.step("kubectl reach: the kubelet API refuses a caller without the API server's certificate"):
        ctx = ssl.create_default_context(cafile=str(pki.server_ca))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        conn.request("GET", f"/containerLogs/{NS}/{POD}/app")
        resp = conn.getresponse()
        if resp.status != 401:
            raise RuntimeError(f"the kubelet API answered {resp.status} to a caller without a certificate")
        conn.close()
