"""Which container a kubelet API request means, from the runner's own view of its pods (the
container states it writes into the Pods' status), with kubelet's answers when there is none:
pod unknown on this node (404), a container not available, waiting to start, or with no previous
instance (400, as kubelet's validateContainerLogStatus), a container not running for exec/attach
(500 `container not found`, as kubelet's GetExec)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nodeenv.kubelet.status import ContainerState


class KubeletError(Exception):
    """Answered as plain text with `status`, as kubelet's server writes its errors."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class PodView(Protocol):
    """What the kubelet API reads of one of the runner's pods (runner.PodRuntime)."""

    pod: dict[str, object]
    init: list[ContainerState]
    main: list[ContainerState]

    def cname(self, container: str) -> str: ...

    @property
    def netns_name(self) -> str | None: ...

    def standin_log(self, container: str) -> Path: ...


class PodIndex(Protocol):
    def find_pod(self, namespace: str, name: str) -> PodView | None: ...


class KubeletNode(PodIndex, Protocol):
    """What the kubelet API serves of the runner: its pods, and its resource metrics."""

    def resource_metrics(self) -> bytes:
        """kubelet's /metrics/resource (Prometheus text, nodeenv/kubelet/resourcestats.py)."""
        ...


@dataclass(frozen=True, slots=True)
class LogSource:
    podman_ref: str = ""
    """A podman container name or id; empty: `file`."""
    file: Path | None = None
    """The log file of a container the runner stands in for with a process."""


def pod_of(index: PodIndex, namespace: str, name: str) -> PodView:
    rt = index.find_pod(namespace, name)
    if rt is None:
        raise KubeletError(404, "pod does not exist")
    return rt


def _state(rt: PodView, container: str) -> ContainerState:
    for st in [*rt.main, *rt.init]:
        if st.name == container:
            return st
    raise KubeletError(400, f'container "{container}" in pod "{_name(rt)}" is not available')


def _name(rt: PodView) -> str:
    meta = rt.pod["metadata"]
    assert isinstance(meta, dict)
    return str(meta["name"])


def _id(container_id: str) -> str:
    return container_id.partition("://")[2]


def log_source(rt: PodView, container: str, previous: bool) -> LogSource:
    st, pod = _state(rt, container), _name(rt)
    last = st.last_state.get("terminated")
    if previous:
        if not last or not last.get("containerID"):
            raise KubeletError(400, f'previous terminated container "{container}" in pod "{pod}" not found')
        return LogSource(podman_ref=_id(last["containerID"]))
    if st.runtime == "standin":
        return LogSource(file=rt.standin_log(container))
    if "running" in st.state or "terminated" in st.state:
        return LogSource(podman_ref=rt.cname(container))
    if last and last.get("containerID"):
        return LogSource(podman_ref=_id(last["containerID"]))
    reason = st.state.get("waiting", {}).get("reason")
    if reason:
        raise KubeletError(400, f'container "{container}" in pod "{pod}" is waiting to start: {reason}')
    raise KubeletError(400, f'container "{container}" in pod "{pod}" is waiting to start - no logs yet')


def running_container(rt: PodView, container: str) -> str:
    """The podman name of `container` if it runs (exec, attach)."""
    for st in [*rt.main, *rt.init]:
        if st.name == container and "running" in st.state and st.runtime == "podman":
            return rt.cname(container)
    raise KubeletError(500, f'container not found ("{container}")')
