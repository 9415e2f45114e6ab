"""FlashDNS in the sandbox: a pod created through the installed `prismnet` gets the cluster DNS in its
CNI result; its resolv.conf is written from it (as the runtime does) and glibc (`getent`) and `dig`
inside the pod's netns resolve a Service, a headless Service, an SRV name, a pod name and a PTR
through the search path; renaming the Service's port changes the SRV answer. On a cluster the pod is on
one node and every query is answered by that node's own FlashDNS listener."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodeenv.scenario import Scenario

NS = "sbx-dns"
POD = "sbx-dns-client"
DOMAIN_KEY = "CLUSTER_DOMAIN"


def run(scn: Scenario) -> None:
    env, place = scn.env, scn.at(2)
    on = place.name
    kubectl = Kubectl(env["KUBECONFIG"])
    with scn.step("flashdns: pod via CNI gets the cluster DNS block; resolv.conf written from it", on=on):
        result = _add_pod(scn, place.env)
        ip = str(result["ips"][0]["address"]).split("/")[0]
        dns = result.get("dns") or {}
        if dns.get("nameservers") != [place.env["CLUSTER_DNS_IP"]] or not dns.get("search", [""])[
            0
        ].startswith(NS):
            raise RuntimeError(f"CNI result dns block is {dns}")
        _write_resolv_conf(scn, dns)
    with scn.step("flashdns: Services, a headless Service with a hostname, the Pod in the API"):
        svc_ip = _create_objects(scn, kubectl, ip)
    domain = place.env[DOMAIN_KEY]
    with scn.step("flashdns: Service by short name (getent, search path)", on=on):
        _until(lambda: svc_ip in _in_pod(["getent", "ahostsv4", "web"]), "web resolves to its ClusterIP")
    with scn.step("flashdns: headless Service and its pod hostname (search path)", on=on):
        _until(lambda: ip in _in_pod(["getent", "ahostsv4", "db"]), "db resolves to the endpoint")
        _until(lambda: ip in _in_pod(["getent", "ahostsv4", "db-0.db"]), "db-0.db resolves")
    with scn.step("flashdns: SRV through the search path (dig +search)", on=on):
        _until(lambda: f"80 web.{NS}.svc.{domain}." in _dig(["+search", "_http._tcp.web", "SRV"]), "SRV")
    with scn.step("flashdns: pod name and PTR", on=on):
        dashed = ip.replace(".", "-")
        _until(lambda: ip in _in_pod(["getent", "ahostsv4", f"{dashed}.{NS}.pod"]), "pod A record")
        _until(lambda: f"web.{NS}.svc.{domain}." in _dig(["-x", svc_ip]), "PTR of the ClusterIP")
    with scn.step("flashdns: the answer changes after the Service changes", on=on):
        kubectl.run("patch", "service", "web", "-n", NS, "--type=json",
                    "-p", '[{"op":"replace","path":"/spec/ports/0/name","value":"web"}]')  # fmt: skip
        _until(lambda: "80 web." in _dig(["+search", "_web._tcp.web", "SRV"]), "the renamed port's SRV")
        old = f"_http._tcp.web.{NS}.svc.{domain}."  # by its full name: a cluster node has no upstream
        _until(lambda: "NXDOMAIN" in _dig([old, "SRV"], short=False), "old SRV gone")


class Kubectl:
    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig

    def run(self, *args: str, stdin: str | None = None) -> str:
        if shutil.which("kubectl") is None:
            raise RuntimeError("kubectl is required (preinstalled at /usr/bin/kubectl)")
        proc = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args], input=stdin,
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        if proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def apply(self, obj: dict[str, Any]) -> None:
        self.run("apply", "-f", "-", stdin=json.dumps(obj))


def _create_objects(scn: Scenario, k: Kubectl, pod_ip: str) -> str:
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    scn.defer(lambda: k.run("delete", "namespace", NS, "--wait=false", "--ignore-not-found"))
    port = [{"name": "http", "port": 80, "protocol": "TCP"}]
    k.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
             "spec": {"ports": port, "selector": {"app": "web"}}})  # fmt: skip
    k.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": NS},
             "spec": {"clusterIP": "None", "ports": port}})  # fmt: skip
    endpoint = {"addresses": [pod_ip], "hostname": "db-0", "conditions": {"ready": True}}
    k.apply({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "db-1", "namespace": NS, "labels": {"kubernetes.io/service-name": "db"}},
             "addressType": "IPv4", "ports": port, "endpoints": [endpoint]})  # fmt: skip
    k.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": NS},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip
    status = {"status": {"phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}]}}
    k.run("patch", "pod", POD, "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    return k.run("get", "service", "web", "-n", NS, "-o", "jsonpath={.spec.clusterIP}").strip()


def _add_pod(scn: Scenario, env: dict[str, str]) -> dict[str, Any]:
    return scn.add_pod(env, NS, POD, POD)


def _write_resolv_conf(scn: Scenario, dns: dict[str, Any]) -> None:
    """`ip netns exec` bind-mounts /etc/netns/<name>/resolv.conf over /etc/resolv.conf."""
    d = Path("/etc/netns") / POD
    d.mkdir(parents=True, exist_ok=True)
    scn.defer(lambda: shutil.rmtree(d, ignore_errors=True))
    lines = [f"nameserver {n}" for n in dns["nameservers"]]
    lines += [f"search {' '.join(dns.get('search', []))}", f"options {' '.join(dns.get('options', []))}"]
    (d / "resolv.conf").write_text("\n".join(lines) + "\n")


def _in_pod(argv: list[str]) -> str:
    proc = subprocess.run(["ip", "netns", "exec", POD, *argv], capture_output=True, text=True, timeout=20)
    return proc.stdout


def _dig(args: list[str], short: bool = True) -> str:
    return _in_pod(["dig", "+time=2", "+tries=1", *(["+short"] if short else []), *args])


def _until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)
