"""kubelet's resource metrics from the cgroups (nodeenv/kubelet/resourcestats.py): a cgroup v2 and a v1
(this machine's hybrid) layout read as cadvisor reads them (CPU seconds; working set = usage minus
inactive file pages), rendered under kubelet's names and parsed back by the double's metrics-server
(nodeenv/kubeapi/metricsserver.py) into a rate over the window between two scrapes."""

from __future__ import annotations

from pathlib import Path

from nodeenv.kubeapi.kubeletclient import KubeletClient, KubeletClientConfig
from nodeenv.kubeapi.metricsserver import MetricsServer, Point, parse, rate
from nodeenv.kubelet.resourcestats import ContainerUsage, Usage, cgroup_usage, render

CG = "/libpod_parent/libpod-abc"


def test_a_v2_cgroup(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    d = tmp_path / CG.strip("/")
    d.mkdir(parents=True)
    (d / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (d / "memory.current").write_text(str(100 * 2**20))
    (d / "memory.stat").write_text("anon 1\nfile 5\ninactive_file 20971520\n")
    assert cgroup_usage(CG, tmp_path) == Usage(2.5, 80 * 2**20)


def test_a_v1_cgroup(tmp_path: Path) -> None:
    cpu, mem = tmp_path / "cpuacct" / CG.strip("/"), tmp_path / "memory" / CG.strip("/")
    cpu.mkdir(parents=True)
    mem.mkdir(parents=True)
    (cpu / "cpuacct.usage").write_text("1500000000\n")
    (mem / "memory.usage_in_bytes").write_text(str(64 * 2**20))
    (mem / "memory.stat").write_text("cache 9\ntotal_inactive_file 16777216\n")
    assert cgroup_usage(CG, tmp_path) == Usage(1.5, 48 * 2**20)
    assert cgroup_usage("/libpod_parent/gone", tmp_path) is None


def test_two_scrapes_make_a_rate() -> None:
    first = render(Usage(10.0, 2**30), [ContainerUsage("default", "web", "c", Usage(1.0, 2**20))]).decode()
    node, containers = parse(first)
    assert node is not None and node.cpu_seconds == 10.0 and node.memory_bytes == 2**30
    assert containers[("default", "web", "c")].cpu_seconds == 1.0
    assert rate(None, node) is None
    later = Point(node.cpu_seconds + 5.0, node.memory_bytes, node.at + 10.0)
    usage = rate(node, later)
    assert usage is not None and usage.nanocores == 500_000_000 and usage.window == 10.0
    server = MetricsServer(KubeletClient(KubeletClientConfig()))  # not used: no scrape here
    server.record("node1", first)
    assert server.nodes == {} and server.containers == {}  # one scrape: no window yet
    server.forget("node1")
    assert server.nodes == {}
