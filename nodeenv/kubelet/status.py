"""A Pod's status as kubelet writes it (pkg/kubelet/status/generate.go): phase, the conditions
PodScheduled, PodReadyToStartContainers, Initialized, ContainersReady and Ready, hostIP, podIP(s),
startTime, and one ContainerStatus per (init) container with its state, ready, started,
restartCount, image and containerID."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerState:
    name: str
    image: str
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    ready: bool = False
    started: bool = False
    restarts: int = 0
    container_id: str = ""
    last_state: Obj = field(default_factory=dict)
    runtime: str = "podman"
    """containerID's scheme: podman, or standin for a sidecar the runner stands in for."""

    def waiting(self, reason: str, message: str = "") -> None:
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        self.ready = self.started = False

    def to_status(self) -> Obj:
        out = {
            "name": self.name, "image": self.image, "imageID": "", "state": self.state,
            "lastState": self.last_state, "ready": self.ready, "restartCount": self.restarts,
            "started": self.started,
        }  # fmt: skip
        if self.container_id:
            out["containerID"] = f"{self.runtime}://{self.container_id}"
        return out


def _cond(kind: str, ok: bool, reason: str = "", message: str = "") -> Obj:
    c: Obj = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None}
    if not ok and reason:
        c["reason"] = reason
    if not ok and message:
        c["message"] = message
    return c


def pod_status(
    *, init: list[ContainerState], main: list[ContainerState], host_ip: str, pod_ip: str,
    sandbox: bool, start_time: str,
) -> Obj:  # fmt: skip
    initialized = all("terminated" in c.state and c.state["terminated"].get("exitCode") == 0 for c in init)
    not_ready = [c.name for c in main if not c.ready]
    running = any("running" in c.state for c in main)
    failed_init = [c for c in init if c.state.get("terminated", {}).get("exitCode", 0) != 0]
    phase = "Running" if initialized and running else "Pending"
    ready_msg = f"containers with unready status: [{' '.join(not_ready)}]"
    incomplete = [c.name for c in init if c.state.get("terminated", {}).get("exitCode") != 0]
    init_msg = f"containers with incomplete status: [{' '.join(incomplete)}]"
    conditions = [
        _cond("PodReadyToStartContainers", sandbox),
        _cond("Initialized", initialized, "ContainersNotInitialized", init_msg),
        _cond("Ready", initialized and not not_ready, "ContainersNotReady", ready_msg),
        _cond("ContainersReady", initialized and not not_ready, "ContainersNotReady", ready_msg),
        _cond("PodScheduled", True),
    ]
    out: Obj = {
        "phase": phase, "conditions": conditions, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "startTime": start_time, "qosClass": "BestEffort",
        "containerStatuses": [c.to_status() for c in main],
    }  # fmt: skip
    if init:
        out["initContainerStatuses"] = [c.to_status() for c in init]
    if pod_ip:
        out["podIP"], out["podIPs"] = pod_ip, [{"ip": pod_ip}]
    if failed_init and phase == "Pending":
        out["message"] = "; ".join(f"init container {c.name} failed" for c in failed_init)
    return out


def unschedulable(message: str) -> Obj:
    return {"phase": "Pending", "conditions": [_cond("PodScheduled", False, "Unschedulable", message)]}
