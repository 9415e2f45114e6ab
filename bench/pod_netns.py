"""Pods for the stress benches: a netns each, wired by the installed `prismnet` executable (ADD/DEL
exactly as a runtime calls it), and processes run inside them, all removed by name and PID."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field

from nodeenv.cni_component import CniRuntime
from tests.integration.controllers.fiberlb.netns_traffic import LOADGEN

__all__ = ["BURN", "LOADGEN", "Pod", "PodNets"]

BURN = "while True: pass"


@dataclass
class Pod:
    netns: str
    cid: str
    args: str
    ip: str
    result: dict[str, object]


@dataclass
class PodNets:
    runtime: CniRuntime
    tag: str
    pods: list[Pod] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    made: int = 0

    def add(self, namespace: str, name: str) -> Pod:
        self.made += 1
        netns = f"{self.tag}-{os.getpid()}-{self.made}"
        subprocess.run(["ip", "netns", "add", netns], check=True)
        cid = f"{self.tag}{os.getpid()}x{self.made:05d}".ljust(32, "0")
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name}"
        call = self.runtime.add(cid, f"/run/netns/{netns}", args=args)
        pod = Pod(netns, cid, args, "", call.out)
        self.pods.append(pod)
        if call.rc != 0:
            raise RuntimeError(f"ADD {namespace}/{name}: {call.out} {call.stderr}")
        ips = call.out["ips"]
        assert isinstance(ips, list)
        pod.ip = str(ips[0]["address"]).split("/")[0]
        return pod

    def delete(self, pod: Pod) -> None:
        call = self.runtime.delete(pod.cid, f"/run/netns/{pod.netns}", pod.result or None, args=pod.args)
        subprocess.run(["ip", "netns", "del", pod.netns], capture_output=True)
        self.pods.remove(pod)
        if call.rc != 0:
            raise RuntimeError(f"DEL {pod.cid}: {call.out} {call.stderr}")

    def run_in(self, pod: Pod | None, *argv: str, nice: int = 0) -> subprocess.Popen[str]:
        prefix = ["ip", "netns", "exec", pod.netns] if pod else []
        proc = subprocess.Popen(
            ["nice", "-n", str(nice), *prefix, sys.executable, "-c", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs.clear()
        for pod in list(self.pods):
            try:
                self.delete(pod)
            except RuntimeError as e:
                print(f"  cleanup: {e}")
