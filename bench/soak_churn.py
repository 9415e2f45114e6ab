"""The soak's churn, through the real callers: the installed CNI plugin, the Kubernetes API double
(kubectl), the CSI gRPC socket, the cluster DNS over UDP, the webhook over mTLS. One action a step,
in rotation; `finish()` removes everything still live so the invariants can expect nothing."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from dnslib import RCODE, DNSRecord  # type: ignore[import-untyped]

from bench.pod_netns import PodNets
from nodeenv.cni_component import installed_runtime
from nodeenv.node import Node
from nodeenv.scenarios.webhook import WebhookClient
from protos import csi_pb2, csi_pb2_grpc

MIB = 1024 * 1024


class Churn:
    def __init__(self, node: Node) -> None:
        e = self.env = node.endpoints
        self.node = node
        self.pods = PodNets(installed_runtime(e, chained=False), "soak")
        self.kubectl = ["kubectl", f"--kubeconfig={e['KUBECONFIG']}", "--request-timeout=10s"]
        channel = grpc.insecure_channel(e["CSI_CONTROLLER_ENDPOINT"])
        self.csi_c, self.csi_n = csi_pb2_grpc.ControllerStub(channel), csi_pb2_grpc.NodeStub(channel)
        self.kubelet = Path(e["CSI_KUBELET_DIR"]) / "soak"
        self.webhook = WebhookClient.from_kubeconfig(e["WEBHOOK_KUBECONFIG"])
        self.token = self._mint()
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.step_no = 0
        self.last_service = 0
        self.live_ns: list[str] = []
        self.actions = [self.pod, self.service, self.dns, self.policy, self.volume, self.review, self.project]

    def step(self) -> None:
        action = self.actions[self.step_no % len(self.actions)]
        self.step_no += 1
        try:
            action()
            self.counts[action.__name__] += 1
        except Exception as e:  # counted and printed: the soak goes on
            self.errors[f"{action.__name__}: {str(e)[:120]}"] += 1

    def _kubectl(self, *args: str, stdin: dict[str, Any] | None = None) -> str:
        proc = subprocess.run(
            [*self.kubectl, *args],
            input=json.dumps(stdin) if stdin else None,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def pod(self) -> None:
        """ADD a pod in a rotating namespace; DEL the oldest beyond 6."""
        self.pods.add(f"soak-{self.step_no % 3}", f"p{self.step_no}")
        if len(self.pods.pods) > 6:
            self.pods.delete(self.pods.pods[0])

    def service(self) -> None:
        """A LoadBalancer Service with an EndpointSlice of the live pods; the previous one deleted."""
        n = self.step_no
        ips = [p.ip for p in self.pods.pods[:3]] or ["10.244.77.1"]
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"s{n}", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        }
        eps = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "addressType": "IPv4",
            "metadata": {
                "name": f"s{n}-a",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": f"s{n}"},
            },
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }
        self._kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "List", "items": [svc, eps]})
        self.last_service = n
        old = n - len(self.actions)
        self._kubectl("delete", "service", f"s{old}", "--ignore-not-found", "--wait=false")
        self._kubectl("delete", "endpointslice", f"s{old}-a", "--ignore-not-found", "--wait=false")

    def policy(self) -> None:
        n = self.step_no
        ns = f"soak-{n % 3}"
        self._kubectl("create", "namespace", ns) if ns not in self._namespaces() else None
        pol = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": f"np{n}", "namespace": ns},
            "spec": {
                "podSelector": {},
                "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 80}]}],
            },
        }
        self._kubectl("apply", "-f", "-", stdin=pol)
        for name in self._kubectl("get", "networkpolicy", "-n", ns, "-o", "name").split():
            if name != f"networkpolicy.networking.k8s.io/np{n}":
                self._kubectl("delete", "-n", ns, name, "--wait=false")

    def _namespaces(self) -> list[str]:
        return [n.split("/")[1] for n in self._kubectl("get", "namespaces", "-o", "name").split()]

    def project(self) -> None:
        """A project namespace (the project controller fills it), the previous one deleted."""
        ns = f"proj-{self.step_no}"
        self._kubectl(
            "apply",
            "-f",
            "-",
            stdin={
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    "labels": {"plasmacloud.io/project-id": ns, "plasmacloud.io/org-id": "org-soak"},
                },
            },
        )
        self.live_ns.append(ns)
        while len(self.live_ns) > 2:
            self._kubectl("delete", "namespace", self.live_ns.pop(0), "--wait=false")

    def volume(self) -> None:
        """A whole CSI lifecycle: create, publish, stage, publish, snapshot, and all undone."""
        cap = csi_pb2.VolumeCapability(
            mount=csi_pb2.VolumeCapability.MountVolume(fs_type="ext4"),
            access_mode=csi_pb2.VolumeCapability.AccessMode(mode=1),
        )
        name, node_id = f"soak-{self.step_no}", self.env["CSI_NODE_ID"]
        req = csi_pb2.CreateVolumeRequest(
            name=name,
            capacity_range=csi_pb2.CapacityRange(required_bytes=32 * MIB),
            volume_capabilities=[cap],
        )
        vid = self.csi_c.CreateVolume(req, timeout=60).volume.volume_id
        ctx = self.csi_c.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(volume_id=vid, node_id=node_id, volume_capability=cap),
            timeout=60,
        ).publish_context
        staging, target = self.kubelet / name / "stage", self.kubelet / name / "mount"
        staging.mkdir(parents=True, exist_ok=True)
        self.csi_n.NodeStageVolume(
            csi_pb2.NodeStageVolumeRequest(
                volume_id=vid, staging_target_path=str(staging), volume_capability=cap, publish_context=ctx
            ),
            timeout=60,
        )
        self.csi_n.NodePublishVolume(
            csi_pb2.NodePublishVolumeRequest(
                volume_id=vid,
                staging_target_path=str(staging),
                target_path=str(target),
                volume_capability=cap,
            ),
            timeout=60,
        )
        (target / "f").write_text("soak")
        snap = self.csi_c.CreateSnapshot(
            csi_pb2.CreateSnapshotRequest(source_volume_id=vid, name=f"{name}-s"), timeout=60
        ).snapshot.snapshot_id
        self.csi_c.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap), timeout=60)
        self.csi_n.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=vid, target_path=str(target)), timeout=60
        )
        self.csi_n.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=vid, staging_target_path=str(staging)), timeout=60
        )
        self.csi_c.ControllerUnpublishVolume(
            csi_pb2.ControllerUnpublishVolumeRequest(volume_id=vid, node_id=node_id), timeout=60
        )
        self.csi_c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vid), timeout=60)
        staging.rmdir()
        staging.parent.rmdir()  # the pod dir this action made (the target went with NodeUnpublish)

    def dns(self) -> None:
        """20 queries to the cluster DNS: the API's name, the newest soak Service's, a foreign one."""
        domain = self.env["CLUSTER_DOMAIN"]
        names = [f"kubernetes.default.svc.{domain}", f"s{self.last_service}.default.svc.{domain}", "x.y"]
        for i in range(20):
            self.lookup(names[i % 3])

    def lookup(self, name: str) -> str:
        """The rcode the cluster DNS answers for an A query of `name`."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(2)
            s.sendto(DNSRecord.question(name).pack(), (self.env["CLUSTER_DNS_IP"], 53))
            return str(RCODE.get(DNSRecord.parse(s.recv(4096)).header.rcode))

    def _mint(self) -> str:
        argv = [
            sys.executable,
            "-m",
            "webhook.main",
            "mint",
            "--sub",
            "user-00000000-0000-4000-8000-0000000000ab",
            "--email",
            "soak@example.com",
            "--org",
            "org-soak",
            "--project",
            "proj-soak",
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.node.process_env(), timeout=30)
        if proc.returncode:
            raise RuntimeError(f"mint: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def review(self) -> None:
        """10 TokenReviews over mTLS, as kube-apiserver sends them."""
        w = self.webhook
        ctx = ssl.create_default_context(cafile=w.ca)
        ctx.load_cert_chain(w.client_cert, w.client_key)
        body = json.dumps(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": self.token}}
        ).encode()
        for _ in range(10):
            req = urllib.request.Request(
                w.url.geturl(), data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
                if not json.loads(r.read())["status"].get("authenticated"):
                    raise RuntimeError("minted token not authenticated")

    def finish(self) -> None:
        """Delete everything still live (pods, Services, policies, namespaces)."""
        self.pods.close()
        for kind in ("service", "endpointslice"):
            for name in self._kubectl("get", kind, "-n", "default", "-o", "name").split():
                if name.split("/")[1].startswith("s") and name.split("/")[1] != "kubernetes":
                    self._kubectl("delete", "-n", "default", name, "--wait=false")
        for ns in self._namespaces():
            if ns.startswith(("soak-", "proj-")):
                self._kubectl("delete", "namespace", ns, "--wait=false")


def csi_leftovers(env: dict[str, str]) -> list[str]:
    """Loop devices of the CSI state dir, mounts and directories left under the soak's kubelet dir."""
    state, kubelet = env["CSI_STATE_DIR"], Path(env["CSI_KUBELET_DIR"]) / "soak"
    real_state, real_kubelet = os.path.realpath(state), os.path.realpath(kubelet)  # what the kernel names
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    out = [ln for ln in losetup.splitlines() if real_state in ln]
    out += [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if real_kubelet in ln]
    out += [str(p) for p in kubelet.rglob("*")] if kubelet.exists() else []
    return out
