"""A Pod's PersistentVolumeClaim volumes on the runner's node, as the attach-detach controller and
kubelet's CSI volume plugin (1.32) handle them:

- mount (on the Pod's boot thread): the claim bound to a CSI PV (waited for); when the CSIDriver
  says attachRequired (or there is none), the VolumeAttachment `csi-<sha256(handle+driver+node)>`
  created and its `status.attached` waited for (attachError named if it never comes); NodeStageVolume
  at `/var/lib/kubelet/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount` (once per
  node) and NodePublishVolume at `/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`,
  with the attachment's metadata as publish context; the published path is what the container mounts
  (volumes.py binds it at its mountPath);
- node expansion (after publishing, and at each `sync`): a published volume whose claim waits for it
  (NodeResizePending) gets NodeExpandVolume, then the claim's capacity is the PV's and its
  FileSystemResizePending condition goes; a failure is a Warning FileSystemResizeFailed Event on the
  Pod and is retried with back-off (e.g. a driver that can only grow ext4 offline, at the next
  NodeStageVolume: the claim stays pending until a Pod mounts it again);
- unmount (when the Pod goes): NodeUnpublishVolume, and when no other Pod on the node uses it
  NodeUnstageVolume and the VolumeAttachment deleted (the external-attacher detaches it; the Pod's
  teardown goes on without waiting for that, as kubelet's does).

The driver's node socket is the one its registrar registered (pluginwatcher.py). Paths are the
node's: the driver sees them through its `/var/lib/kubelet` mount.
Not done: raw block volumes, fsGroup ownership changes, SELinux mount options, read-only claims.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import grpc

from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.envvars import ConfigError, PodContext
from nodeenv.kubelet.sidecars.base import Backoff, rpc_error
from nodeenv.kubelet.sidecars.events import NORMAL, WARNING, EventRecorder
from nodeenv.kubelet.sidecars.volumecaps import pv_capability, to_bytes
from nodeenv.kubelet.storage.pluginwatcher import PluginWatcher
from nodeenv.kubelet.volumes import NodeRoot
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)
Obj = dict[str, Any]
KUBELET = PurePosixPath("/var/lib/kubelet")
VA = "/apis/storage.k8s.io/v1/volumeattachments"
NodeRpc = csi_pb2.NodeServiceCapability.RPC


class VolumeNotReady(ConfigError):
    """A claim's volume could not be made ready for the Pod (kubelet's FailedMount / FailedAttachVolume);
    its containers stay ContainerCreating."""

    reason = "ContainerCreating"


def staging_path(driver: str, handle: str) -> PurePosixPath:
    sha = hashlib.sha256(handle.encode()).hexdigest()
    return KUBELET / "plugins" / "kubernetes.io" / "csi" / driver / sha / "globalmount"


def target_path(pod_uid: str, pv: str) -> PurePosixPath:
    return KUBELET / "pods" / pod_uid / "volumes" / "kubernetes.io~csi" / pv / "mount"


def node_capabilities(node: csi_pb2_grpc.NodeStub) -> set[int]:
    reply = node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest(), timeout=10)
    return {int(c.rpc.type) for c in reply.capabilities}


def attachment_name(handle: str, driver: str, node: str) -> str:
    return "csi-" + hashlib.sha256(f"{handle}{driver}{node}".encode()).hexdigest()


@dataclass(frozen=True)
class Published:
    pod_uid: str
    pod: tuple[str, str]
    """The Pod's namespace and name."""
    claim: tuple[str, str]
    pv: Obj
    driver: str
    publish_context: dict[str, str]

    @property
    def handle(self) -> str:
        return str(self.pv["spec"]["csi"]["volumeHandle"])

    @property
    def staging(self) -> PurePosixPath:
        return staging_path(self.driver, self.handle)

    @property
    def target(self) -> PurePosixPath:
        return target_path(self.pod_uid, self.pv["metadata"]["name"])


class CsiVolumes:
    def __init__(
        self, client: KubeClient, node: str, root: NodeRoot, plugins: PluginWatcher, timeout: float = 120.0
    ) -> None:
        self.client, self.node, self.root, self.plugins, self.timeout = client, node, root, plugins, timeout
        self.published: list[Published] = []
        self._lock = threading.Lock()
        self.events = EventRecorder(lambda: client, "kubelet", node)
        self.backoff = Backoff(1.0, 300.0)

    def _wait(self, what: str, check: Callable[[], Any], why: Callable[[], str] = lambda: "") -> Any:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.5)
        raise VolumeNotReady(f"timed out waiting for {what}{(': ' + why()) if why() else ''}")

    def node_stub(self, driver: str) -> tuple[grpc.Channel, csi_pb2_grpc.NodeStub]:
        endpoint = self._wait(
            f"CSI driver {driver} to register on node {self.node}", lambda: self.plugins.endpoint(driver)
        )
        ch = grpc.insecure_channel(f"unix://{endpoint}")
        return ch, csi_pb2_grpc.NodeStub(ch)

    def mount(self, ctx: PodContext, vol: Obj) -> Path:
        """The claim's volume published for the Pod; its path on this machine."""
        ns, name = ctx.pod["metadata"]["namespace"], vol["persistentVolumeClaim"]["claimName"]

        def bound() -> Obj | None:
            try:
                pvc = self.client.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
            except ApiError as e:
                if e.code == 404:
                    return None
                raise
            return pvc if pvc["spec"].get("volumeName") else None

        pvc = self._wait(f'persistentvolumeclaim "{name}" to be bound', bound)
        pv = self.client.request("GET", f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
        if "csi" not in pv["spec"]:
            raise VolumeNotReady(
                f"volume {pv['metadata']['name']}: only CSI persistent volumes are mounted here"
            )
        driver = pv["spec"]["csi"]["driver"]
        context = self.attach(pv, driver)
        vol_ = Published(
            ctx.pod["metadata"]["uid"], (ns, ctx.pod["metadata"]["name"]), (ns, name), pv, driver, context
        )
        ch, node = self.node_stub(driver)
        with ch:
            caps = node_capabilities(node)
            cap = pv_capability(pv, NodeRpc.SINGLE_NODE_MULTI_WRITER in caps)
            attrs = pv["spec"]["csi"].get("volumeAttributes") or {}
            try:
                with self._lock:
                    staged = any(p.handle == vol_.handle for p in self.published)
                if NodeRpc.STAGE_UNSTAGE_VOLUME in caps and not staged:
                    self.root.host(str(vol_.staging)).parent.mkdir(parents=True, exist_ok=True)
                    node.NodeStageVolume(
                        csi_pb2.NodeStageVolumeRequest(
                            volume_id=vol_.handle,
                            publish_context=context,
                            staging_target_path=str(vol_.staging),
                            volume_capability=cap,
                            volume_context=attrs,
                        ),
                        timeout=120,
                    )
                self.root.host(str(vol_.target)).parent.mkdir(parents=True, exist_ok=True)
                node.NodePublishVolume(
                    csi_pb2.NodePublishVolumeRequest(
                        volume_id=vol_.handle,
                        publish_context=context,
                        target_path=str(vol_.target),
                        staging_target_path=str(vol_.staging) if NodeRpc.STAGE_UNSTAGE_VOLUME in caps else "",
                        volume_capability=cap,
                        volume_context=attrs,
                    ),
                    timeout=120,
                )
            except grpc.RpcError as e:
                raise VolumeNotReady(
                    f"MountVolume.SetUp failed for volume {pv['metadata']['name']!r}: {rpc_error(e)}"
                ) from None
        with self._lock:
            self.published.append(vol_)
        log.info(
            "pod %s/%s: volume %s published at %s",
            ns,
            ctx.pod["metadata"]["name"],
            pv["metadata"]["name"],
            vol_.target,
        )
        self.expand_pending(vol_)
        return self.root.host(str(vol_.target))

    def attach(self, pv: Obj, driver: str) -> dict[str, str]:
        try:
            csidriver = self.client.request("GET", f"/apis/storage.k8s.io/v1/csidrivers/{driver}")
            required = (csidriver.get("spec") or {}).get("attachRequired", True)
        except ApiError as e:
            if e.code != 404:
                raise
            required = True
        if not required:
            return {}
        handle = pv["spec"]["csi"]["volumeHandle"]
        name = attachment_name(handle, driver, self.node)
        va = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {
                "attacher": driver,
                "nodeName": self.node,
                "source": {"persistentVolumeName": pv["metadata"]["name"]},
            },
        }
        self._wait(f"the previous attachment {name} to be detached", lambda: not self._deleting(name))
        try:
            self.client.request("POST", VA, va)
        except ApiError as e:
            if e.code != 409:
                raise
        last: dict[str, Obj] = {}

        def attached() -> dict[str, str] | None:
            last["va"] = self.client.request("GET", f"{VA}/{name}")
            st = last["va"].get("status") or {}
            return dict(st.get("attachmentMetadata") or {"attached": "true"}) if st.get("attached") else None

        def attach_error() -> str:
            return str(((last.get("va") or {}).get("status") or {}).get("attachError", {}).get("message", ""))

        got: dict[str, str] = self._wait(
            f"volume {pv['metadata']['name']} to be attached ({name})", attached, attach_error
        )
        return {} if got == {"attached": "true"} else got

    def _deleting(self, name: str) -> bool:
        try:
            return bool(self.client.request("GET", f"{VA}/{name}")["metadata"].get("deletionTimestamp"))
        except ApiError as e:
            if e.code != 404:
                raise
            return False

    def unmount(self, pod_uid: str) -> None:
        """The Pod's volumes unpublished; unstaged and detached when no other Pod here uses them."""
        with self._lock:
            mine = [p for p in self.published if p.pod_uid == pod_uid]
            self.published = [p for p in self.published if p.pod_uid != pod_uid]
        for p in mine:
            try:
                self._teardown(p)
            except (grpc.RpcError, ApiError, VolumeNotReady) as e:
                log.warning("volume %s of pod %s: teardown failed: %s", p.pv["metadata"]["name"], pod_uid, e)

    def _teardown(self, p: Published) -> None:
        endpoint = self.plugins.endpoint(p.driver)
        if endpoint is None:
            raise VolumeNotReady(f"CSI driver {p.driver} is not registered")
        with grpc.insecure_channel(f"unix://{endpoint}") as ch:
            node = csi_pb2_grpc.NodeStub(ch)
            node.NodeUnpublishVolume(
                csi_pb2.NodeUnpublishVolumeRequest(volume_id=p.handle, target_path=str(p.target)), timeout=60
            )
            host = self.root.host(str(p.target)).parent
            if host.is_dir() and not any(host.iterdir()):
                host.rmdir()
            with self._lock:
                if any(q.handle == p.handle for q in self.published):
                    return
            caps = node_capabilities(node)
            if NodeRpc.STAGE_UNSTAGE_VOLUME in caps:
                node.NodeUnstageVolume(
                    csi_pb2.NodeUnstageVolumeRequest(volume_id=p.handle, staging_target_path=str(p.staging)),
                    timeout=60,
                )
        # the detach itself is the external-attacher's (its finalizer holds the object until
        # ControllerUnpublishVolume is done): not waited for, as kubelet does not hold a Pod's
        # teardown for it (its sandbox, CNI DEL included, stops next). The next attach here waits
        # for this one to be gone (attach()).
        try:
            self.client.request("DELETE", f"{VA}/{attachment_name(p.handle, p.driver, self.node)}")
        except ApiError as e:
            if e.code != 404:
                raise

    def sync(self) -> None:
        """NodeExpandVolume for published volumes whose claim waits for it."""
        with self._lock:
            published = list(self.published)
        done: set[str] = set()
        for p in published:
            if p.handle not in done and self.backoff.due(p.handle):
                done.add(p.handle)
                self.expand_pending(p)

    def expand_pending(self, p: Published) -> None:
        ns, name = p.claim
        try:
            pvc = self.client.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
        except ApiError:
            return
        if ((pvc.get("status") or {}).get("allocatedResourceStatuses") or {}).get(
            "storage"
        ) == "NodeResizePending":
            self.expand(p, pvc)

    def expand(self, p: Published, pvc: Obj) -> None:
        pv = self.client.request("GET", f"/api/v1/persistentvolumes/{p.pv['metadata']['name']}")
        size = pv["spec"]["capacity"]["storage"]
        endpoint = self.plugins.endpoint(p.driver)
        if endpoint is None:
            return
        with grpc.insecure_channel(f"unix://{endpoint}") as ch:
            node = csi_pb2_grpc.NodeStub(ch)
            caps = node_capabilities(node)
            if NodeRpc.EXPAND_VOLUME in caps:
                try:
                    node.NodeExpandVolume(
                        csi_pb2.NodeExpandVolumeRequest(
                            volume_id=p.handle,
                            volume_path=str(p.target),
                            staging_target_path=str(p.staging),
                            capacity_range=csi_pb2.CapacityRange(required_bytes=to_bytes(size)),
                            volume_capability=pv_capability(pv, NodeRpc.SINGLE_NODE_MULTI_WRITER in caps),
                        ),
                        timeout=120,
                    )
                except grpc.RpcError as e:
                    self.backoff.failed(p.handle)
                    pod = {
                        "kind": "Pod",
                        "apiVersion": "v1",
                        "metadata": {"namespace": p.pod[0], "name": p.pod[1], "uid": p.pod_uid},
                    }
                    volume = pv["metadata"]["name"]
                    msg = f'MountVolume.NodeExpandVolume failed for volume "{volume}" requested {size}: '
                    self.events.emit(pod, WARNING, "FileSystemResizeFailed", msg + rpc_error(e))
                    return
        self.backoff.done(p.handle)
        m = pvc["metadata"]
        path = f"/api/v1/namespaces/{m['namespace']}/persistentvolumeclaims/{m['name']}/status"
        status = {"capacity": {"storage": size}, "conditions": None, "allocatedResourceStatuses": None}
        self.client.request("PATCH", path, {"status": status}, "application/merge-patch+json")
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", **pvc}
        self.events.emit(
            ref,
            NORMAL,
            "FileSystemResizeSuccessful",
            f'MountVolume.NodeExpandVolume succeeded for volume "{pv["metadata"]["name"]}" {self.node}',
        )
