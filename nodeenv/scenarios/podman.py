"""PrismNET under a real container runtime in the sandbox: Debian's podman (CNI backend, private
config and storage in the run dir) runs a container on the installed conflist, with no PRISMNET
variable in its environment, and it pings a pod wired through the CNI executable. On a cluster
podman runs on a node (in its network namespace, with its install root) and the pod is on another."""

from __future__ import annotations

import os
import subprocess

from nodeenv.cni_component import installed_runtime
from nodeenv.daemons import run_checked
from nodeenv.podman_runtime import make_podman, missing_prerequisites
from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios.cni import _ping

CONTAINER, POD, POD_NS = "sbx-podman", "sbx-pm-pod", "sandbox-p"
POD_CID = "sbxpmpod" + "0" * 24
POD_ARGS = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={POD_NS};K8S_POD_NAME={POD}"


def run(scn: Scenario) -> None:
    env, here, there = scn.env, scn.at(1), scn.at(2)
    with scn.step("podman: container on the PrismNET network (installed conflist only)", on=here.name):
        missing = missing_prerequisites()
        if missing:
            raise RuntimeError(f"podman prerequisites missing: {', '.join(missing)}; run `make setup`")
        parent = f"/k8shost-sbx-{os.getpid()}"
        pm = make_podman(scn.node.run_dir / "podman", here.install_root, parent, here.netns)
        scn.defer(pm.remove_all)
        pm.build_image()
        cid = pm.start(CONTAINER)
        ip = pm.inspect(CONTAINER, "{{.NetworkSettings.Networks.prismnet.IPAddress}}")
        if ip not in _nbctl(env, "lsp-get-addresses", f"{CONTAINER}-{cid}"):
            raise RuntimeError(f"{ip} is not the address of the container's OVN port")
    with scn.step("podman: container and a CNI pod ping each other", on=scn.where(here, there)):
        pod_ip = _add_pod(scn, there)
        pm("exec", CONTAINER, "ping", "-c1", "-W2", pod_ip)
        _ping(POD, ip)
    with scn.step("podman: rm -f leaves no OVN port", on=here.name):
        pm("rm", "-f", "-t", "0", CONTAINER)
        if cid in _nbctl(env, "--bare", "--columns=name", "list", "Logical_Switch_Port"):
            raise RuntimeError(f"the OVN port of {CONTAINER} is left behind")


def _add_pod(scn: Scenario, place: Place) -> str:
    rt = installed_runtime(place.env)  # as kubelet does: nothing but the installed conflist
    run_checked(["ip", "netns", "add", POD])
    scn.defer(lambda: subprocess.run(["ip", "netns", "del", POD], check=False))
    call = rt.add(POD_CID, f"/run/netns/{POD}", args=POD_ARGS)
    scn.defer(lambda: rt.delete(POD_CID, f"/run/netns/{POD}", call.out or None, args=POD_ARGS))
    if call.rc:
        raise RuntimeError(f"ADD {POD}: {call.out} {call.stderr}")
    return str(call.out["ips"][0]["address"]).split("/")[0]  # type: ignore[index]


def _nbctl(env: dict[str, str], *args: str) -> str:
    return run_checked(["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--timeout=10", *args])
