"""FiberLB in the sandbox: three CNI pods serving HTTP, an EndpointSlice (no kube-controller-manager
runs here, so the scenario writes it), a LoadBalancer Service created with kubectl that gets an
external IP; HTTP from a client pod and from the node reaches all three; a removed backend stops
answering; deleting the Service removes the VIP and frees the IP. The same for a ClusterIP Service.
On a cluster the backends are on every node (one each), the client pod on the first and the
requests "from the node" come from the second node's namespace: the load balancer is the cluster's
(central NB rows every chassis enforces) and each answer crosses Geneve to its backend's node."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodeenv.cni_component import CniRuntime, installed_runtime
from nodeenv.daemons import run_checked
from nodeenv.scenario import Place, Scenario

NS, CLIENT_NS = "sandbox-lb", "sandbox-lbc"
BACKENDS = ("sbx-lb-1", "sbx-lb-2", "sbx-lb-3")
CLIENT = "sbx-lb-client"
HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}


def run(scn: Scenario) -> None:
    pods: dict[str, str] = {}
    places = [scn.at(i) for i in range(len(BACKENDS))]
    client, node = scn.at(0), scn.at(1)
    with scn.step("fiberlb: 3 CNI pods serving HTTP + a client pod", on=scn.where(*places, client)):
        for name, place in zip(BACKENDS, places, strict=True):
            pods[name] = _pod(scn, _runtime(place.env), name, NS)
            _serve(scn, name)
        _pod(scn, _runtime(client.env), CLIENT, CLIENT_NS)
        _apply(scn.env, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for kind in ("LoadBalancer", "ClusterIP"):
        _service_round(scn, kind, pods, client, node)


def _service_round(scn: Scenario, kind: str, pods: dict[str, str], client: Place, node: Place) -> None:
    name = "web-lb" if kind == "LoadBalancer" else "web-cip"
    env = scn.env
    scn.defer(
        lambda: _kubectl(env, "-n", NS, "delete", "service,endpointslice", "-l", f"sbx={name}", check=False)
    )
    with scn.step(f"fiberlb: {kind} Service + EndpointSlice applied with kubectl"):
        _apply(env, _slice(name, list(pods.values())))
        _apply(env, _service(name, kind))
    with scn.step(f"fiberlb: {kind} address in the Service"):
        vip = _until(lambda: _address(env, name, kind), bool, f"{name} has no address")
    with scn.step(f"fiberlb: HTTP to {vip} from a pod and from the node reaches all 3",
                  on=scn.where(client, node)):  # fmt: skip
        for netns in (CLIENT, node.netns or None):
            _reach_all(netns, vip, pods)
    with scn.step("fiberlb: a backend removed from the EndpointSlice stops answering", on=client.name):
        _apply(env, _slice(name, [ip for pod, ip in pods.items() if pod != BACKENDS[0]]))
        _until(lambda: _answers(CLIENT, vip), lambda r: r == set(BACKENDS[1:]), "backend removal")
    with scn.step(
        f"fiberlb: {kind} Service deleted -> VIP gone" + (", IP free" if kind == "LoadBalancer" else "")
    ):
        _kubectl(env, "-n", NS, "delete", "service", name, "--wait=true")
        _until(lambda: vip not in _nb_vips(env), bool, f"VIP {vip} still in OVN")
        if kind == "LoadBalancer":
            _apply(env, _service("web-lb-again", kind))
            scn.defer(lambda: _kubectl(env, "-n", NS, "delete", "service", "web-lb-again", check=False))
            again = _until(lambda: _address(env, "web-lb-again", kind), bool, "second Service has no IP")
            if again != vip:
                raise RuntimeError(f"the freed IP {vip} was not handed out again (got {again})")
            _kubectl(env, "-n", NS, "delete", "service", "web-lb-again", "--wait=true")


def _reach_all(netns: str | None, vip: str, pods: dict[str, str]) -> None:
    """Every backend answers through the VIP. Seen once in a full make test: one backend never
    answered through the VIP from the client pod within 15 s (curl timeouts, not refusals); the
    error now says whether each backend answers directly, to tell the load balancer from the pod."""
    what = f"{netns or 'node'} -> {vip}: all 3"
    try:
        _until(lambda: _answers(netns, vip), lambda r: r == set(BACKENDS), what, timeout=30.0)
    except RuntimeError as e:
        direct = {pod: sorted(_answers(netns, f"{ip}:8080", n=2)) for pod, ip in pods.items()}
        raise RuntimeError(f"{e}; each backend directly: {direct}") from None


def _runtime(env: dict[str, str]) -> CniRuntime:
    return installed_runtime(env, chained=False)


def _pod(scn: Scenario, rt: CniRuntime, name: str, ns: str) -> str:
    run_checked(["ip", "netns", "add", name])
    scn.defer(lambda: subprocess.run(["ip", "netns", "del", name], check=False))
    cid, args = (
        f"{name.replace('-', '')}{'0' * 24}",
        f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name}",
    )
    call = rt.add(cid, f"/run/netns/{name}", args=args)
    if call.rc:
        raise RuntimeError(f"ADD {name}: {call.out} {call.stderr}")
    scn.defer(lambda: rt.delete(cid, f"/run/netns/{name}", call.out, args=args))
    return str(call.out["ips"][0]["address"]).split("/")[0]  # type: ignore[index]


def _serve(scn: Scenario, name: str, netns: str = "") -> None:
    """An HTTP server on 8080 in the pod's network namespace (`netns`, by default named `name`)
    answering its name."""
    root = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    (root / "index.html").write_text(name)
    argv = ["ip", "netns", "exec", netns or name, sys.executable, "-m", "http.server", "8080",
            "--directory", str(root)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop() -> None:
        proc.kill()
        proc.wait()
        subprocess.run(["rm", "-rf", str(root)], check=False)

    scn.defer(stop)


def _kubectl(env: dict[str, str], *args: str, stdin: str = "", check: bool = True) -> str:
    argv = ["kubectl", f"--kubeconfig={env['KUBECONFIG']}", *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def _apply(env: dict[str, str], obj: dict[str, Any]) -> None:
    _kubectl(env, "apply", "-f", "-", stdin=json.dumps(obj))


def _service(name: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NS, "labels": {"sbx": name.removesuffix("-again")}},
            "spec": {"type": kind, "selector": {"app": "web"}, "ports": [HTTP]}}  # fmt: skip


def _slice(service: str, ips: list[str]) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": f"{service}-sbx", "namespace": NS,
                         "labels": {"kubernetes.io/service-name": service, "sbx": service}},
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}  # fmt: skip


def _address(env: dict[str, str], name: str, kind: str, namespace: str = NS) -> str:
    path = "{.status.loadBalancer.ingress[0].ip}" if kind == "LoadBalancer" else "{.spec.clusterIP}"
    argv = ["-n", namespace, "get", "service", name, "-o", f"jsonpath={path}"]
    return _kubectl(env, *argv, check=False).strip()


def _answers(netns: str | None, vip: str, n: int = 24) -> set[str]:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    out = set()
    for _ in range(n):
        proc = subprocess.run([*prefix, "curl", "-s", "--max-time", "2", f"http://{vip}/"],
                              capture_output=True, text=True)  # fmt: skip
        out.add(proc.stdout.strip() if proc.returncode == 0 else f"curl exit {proc.returncode}")
    return out


def _nb_vips(env: dict[str, str]) -> str:
    return run_checked(
        ["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--bare", "--columns=vips", "list", "Load_Balancer"]
    )


def _until(fn: Callable[[], Any], ok: Callable[[Any], bool], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} (last: {value!r})")
        time.sleep(0.2)
