"""What kubelet's `/metrics/resource` endpoint serves (and metrics-server reads): cumulative CPU
seconds and the memory working set of the node and of each running container, from the cgroups.

cgroup v2: `cpu.stat` usage_usec, `memory.current` minus `memory.stat` inactive_file; the hybrid v1
layout of this machine: `cpuacct.usage` (ns), `memory.usage_in_bytes` minus total_inactive_file
(cadvisor's working set either way). A container's cgroup is podman's `State.CgroupPath`; the
node's is the root cgroup: the nodes of one machine share its figures, as kubelets on one host
would. Containers the runner stands in for with a process (CSI sidecars) have no cgroup and no
sample. Rendered with prometheus_client under kubelet's metric names and labels, each sample with
its timestamp (ms)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_seconds: float
    working_set_bytes: int


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    namespace: str
    pod: str
    container: str
    usage: Usage


def _stat(path: Path, key: str) -> int:
    for line in path.read_text().splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


def cgroup_usage(rel: str, root: Path = CGROUP) -> Usage | None:
    """The usage of the cgroup at `rel` (podman's CgroupPath, "/" for the root), v2 or v1."""
    rel = rel.strip("/")
    v2 = root / rel
    try:
        if (root / "cgroup.controllers").exists():
            cpu = _stat(v2 / "cpu.stat", "usage_usec") / 1e6
            mem = _memory(v2 / "memory.current", v2 / "memory.stat", "inactive_file")
        else:
            cpu = int((root / "cpuacct" / rel / "cpuacct.usage").read_text()) / 1e9
            m = root / "memory" / rel
            mem = _memory(m / "memory.usage_in_bytes", m / "memory.stat", "total_inactive_file")
    except (OSError, ValueError):
        return None
    return Usage(cpu, mem)


def _memory(current: Path, stat: Path, inactive: str) -> int:
    if not current.exists():  # the v2 root has no memory.current: the machine's, from meminfo
        info = {
            ln.split(":")[0]: int(ln.split()[1]) * 1024
            for ln in Path("/proc/meminfo").read_text().splitlines()
        }
        return info["MemTotal"] - info["MemAvailable"]
    used = int(current.read_text())
    return max(0, used - _stat(stat, inactive))


class ResourceCollector(Collector):
    """kubelet's resource metrics of one scrape: node first, then each container."""

    def __init__(self, node: Usage | None, containers: Iterable[ContainerUsage]) -> None:
        self.node, self.containers, self.at = node, list(containers), time.time()

    def collect(self) -> Iterator[Metric]:
        labels = ["container", "namespace", "pod"]
        cpu, mem = (
            "Cumulative cpu time consumed by the {} in core-seconds",
            "Current working set of the {} in bytes",
        )
        node_cpu = CounterMetricFamily("node_cpu_usage_seconds", cpu.format("node"))
        node_mem = GaugeMetricFamily("node_memory_working_set_bytes", mem.format("node"))
        c_cpu = CounterMetricFamily("container_cpu_usage_seconds", cpu.format("container"), labels=labels)
        c_mem = GaugeMetricFamily(
            "container_memory_working_set_bytes", mem.format("container"), labels=labels
        )
        if self.node is not None:
            node_cpu.add_metric([], self.node.cpu_seconds, timestamp=self.at)
            node_mem.add_metric([], self.node.working_set_bytes, timestamp=self.at)
        for c in self.containers:
            values = [c.container, c.namespace, c.pod]
            c_cpu.add_metric(values, c.usage.cpu_seconds, timestamp=self.at)
            c_mem.add_metric(values, c.usage.working_set_bytes, timestamp=self.at)
        yield from (node_cpu, node_mem, c_cpu, c_mem)


def render(node: Usage | None, containers: Iterable[ContainerUsage]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ResourceCollector(node, containers))
    return generate_latest(registry)
