"""The Kubernetes API double as a newcomer meets it: kubectl with node.env's KUBECONFIG lists the
cluster's namespaces, applies a Service (ClusterIP from the service CIDR), sees a status change
arrive on `kubectl get -w`, and a finalizer hold a deletion until it is removed."""

from __future__ import annotations

import json
import subprocess
import time

from nodeenv.scenario import Scenario

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: sandbox-kubeapi, namespace: default, finalizers: [sandbox.k8shost.io/hold]}
spec:
  type: LoadBalancer
  ports: [{name: http, port: 80, targetPort: 8080}]
"""


def _kubectl(scn: Scenario, *args: str, stdin: str | None = None) -> str:
    argv = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=10s", *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def run(scn: Scenario) -> None:
    with scn.step("kubeapi: kubectl lists the cluster's namespaces"):
        names = _kubectl(scn, "get", "ns", "-o", "name").split()
        if "namespace/kube-system" not in names:
            raise RuntimeError(f"unexpected namespaces: {names}")
    with scn.step("kubeapi: kubectl apply -f a Service gets a ClusterIP"):
        _kubectl(scn, "apply", "-f", "-", stdin=SERVICE)
        scn.defer(lambda: _release(scn))
        svc = json.loads(_kubectl(scn, "get", "svc", "sandbox-kubeapi", "-o", "json"))
        if not svc["spec"]["clusterIP"].startswith("10.96."):
            raise RuntimeError(f"clusterIP {svc['spec']['clusterIP']} outside the service CIDR")
    with scn.step("kubeapi: a status change arrives on kubectl get -w"):
        _status_on_watch(scn)
    with scn.step("kubeapi: a finalizer holds the deletion until removed"):
        _kubectl(scn, "delete", "svc", "sandbox-kubeapi", "--wait=false")
        held = json.loads(_kubectl(scn, "get", "svc", "sandbox-kubeapi", "-o", "json"))
        if not held["metadata"].get("deletionTimestamp"):
            raise RuntimeError("no deletionTimestamp on a Service held by a finalizer")
        _release(scn)
        _kubectl(scn, "wait", "--for=delete", "svc/sandbox-kubeapi", "--timeout=10s")


def _status_on_watch(scn: Scenario) -> None:
    jsonpath = 'jsonpath={.status.loadBalancer.ingress[0].ip}{"\\n"}'
    argv = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "get", "svc", "sandbox-kubeapi", "-w",
            "--request-timeout=10s", "-o", jsonpath]  # fmt: skip
    watcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        patch = '{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.200"}]}}}'
        _kubectl(scn, "patch", "svc", "sandbox-kubeapi", "--subresource=status", "--type=merge", "-p", patch)
        assert watcher.stdout is not None
        for line in watcher.stdout:
            if line.strip() == "192.0.2.200":
                return
        raise RuntimeError("the status change never arrived on the watch")
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)


def _release(scn: Scenario) -> None:
    argv = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "patch", "svc", "sandbox-kubeapi",
            "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]']  # fmt: skip
    subprocess.run(argv, capture_output=True, text=True, timeout=30)  # already gone is fine
