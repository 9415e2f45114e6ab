"""kubectl top through the kubelet API, on kubectl_reach's node `sandbox-kubelet` (while it runs):
the API double's metrics-server scrapes the runner's /metrics/resource over HTTPS with its kubelet
client certificate, so `kubectl top node` shows the node; the same path without that certificate
is 401 (no runner serves kubelet's plaintext read-only port 10255 either)."""

from __future__ import annotations

import http.client
import ssl
import subprocess
import time

from nodeenv.kubelet.kubeletapi.pki import KubeletPki
from nodeenv.scenario import Scenario


def _top(scn: Scenario, node: str) -> subprocess.CompletedProcess[str]:
    argv = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=20s", "top", "node", node]
    return subprocess.run(argv, capture_output=True, text=True, timeout=40)


def run_on(scn: Scenario, pki: KubeletPki, node: str, port: int) -> None:
    """`node`'s kubelet API listens on 127.0.0.1:`port`."""
    with scn.step(f"kubelet metrics: kubectl top node {node} (scraped over the kubelet API)") as result:
        deadline, proc = time.monotonic() + 60, _top(scn, node)
        while proc.returncode and time.monotonic() < deadline:  # two scrapes make a window
            time.sleep(2)
            proc = _top(scn, node)
        rows = proc.stdout.splitlines()
        if proc.returncode or len(rows) != 2 or not rows[1].startswith(node):
            raise RuntimeError(f"kubectl top node {node}: {proc.stdout!r} {proc.stderr.strip()!r}")
        result.detail = " ".join(rows[1].split()[1:])
    with scn.step("kubelet metrics: /metrics/resource refused without the API server's certificate"):
        ctx = ssl.create_default_context(cafile=str(pki.server_ca))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        try:
            conn.request("GET", "/metrics/resource")
            status = conn.getresponse().status
        finally:
            conn.close()
        if status != 401:
            raise RuntimeError(
                f"the kubelet API answered {status} to /metrics/resource without a certificate"
            )
