"""One cluster per test session (3 nodes, each a network namespace, Geneve between them) and pods
ADDed through each node's installed plugin and conflist, exactly as that node's runtime does."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import list_netns
from nodeenv.cni_component import installed_runtime
from nodeenv.daemons import is_alive
from tests.conftest import require_ovn

if TYPE_CHECKING:
    from tests.integration.cluster.kube import Api

PREFIX = "k8sht"
CLUSTER_CIDR = "10.98.0.0/16"
_ids = itertools.count(1)


@pytest.fixture(scope="session")
def cluster(short_tmp: Path) -> Iterator[Cluster]:
    """A 3-node cluster; K8SHOST_OVN_CENTRAL=raft runs it on 3-member NB/SB clusters."""
    require_ovn()
    settings = ClusterSettings(
        run_dir=short_tmp / "cluster",
        nodes=3,
        prefix=PREFIX,
        cluster_cidr=CLUSTER_CIDR,
        ovn_central=os.environ.get("K8SHOST_OVN_CENTRAL", "standalone"),
    )
    c = Cluster(settings)
    c.up()
    records = [r for part in (c.control, c.central, *(n.node for n in c.nodes)) for r in part.daemons.load()]
    try:
        yield c
    finally:
        faults = c.faults()
        c.down()
        left = [r.name for r in records if is_alive(r)] + list_netns(PREFIX)
        left += [str(p) for p in (settings.run_dir, c.run_dir) if p.exists() or p.is_symlink()]  # + alias
        assert not faults, f"cluster daemons dead or wedged: {faults}"
        assert not left, f"cluster-down left behind: {left}"


@pytest.fixture(autouse=True)
def _cluster_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the cluster: every daemon of every node alive and answering."""
    yield
    if "cluster" in request.fixturenames:
        faults = request.getfixturevalue("cluster").faults()
        assert not faults, f"cluster daemons dead or wedged: {faults}"


@dataclass
class Pod:
    name: str
    namespace: str
    node: ClusterNode
    netns: str
    cid: str
    args: str
    result: dict[str, object]

    @property
    def lsp(self) -> str:
        """The pod's logical switch port, as the agent names it (`<pod>-<container id>`)."""
        return f"{self.name}-{self.cid}"

    @property
    def ip(self) -> str:
        ips = self.result["ips"]
        assert isinstance(ips, list)
        return str(ips[0]["address"]).split("/")[0]

    def run(self, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.netns, *argv], capture_output=True, text=True, timeout=timeout
        )


@dataclass
class Pods:
    """Pods (netns `k8sht-p<n>`, so cluster-down would remove them too) deleted at the end."""

    created: list[Pod]

    def netns(self) -> str:
        name = f"{PREFIX}-p{os.getpid()}-{next(_ids)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        return name

    def add(self, node: ClusterNode, namespace: str = "default", name: str = "") -> Pod:
        """ADD through the node's installed plugin + conflist, run in the node's namespace."""
        netns = self.netns()
        name = name or f"pod{next(_ids)}"
        cid = f"{node.name}x{next(_ids):06d}".ljust(32, "0")
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name}"
        call = installed_runtime(node.env).add(cid, f"/run/netns/{netns}", args=args)
        pod = Pod(name, namespace, node, netns, cid, args, call.out)
        self.created.append(pod)
        assert call.rc == 0, (node.name, call.out, call.stderr)
        return pod

    def delete_all(self) -> None:
        for pod in reversed(self.created):
            call = installed_runtime(pod.node.env).delete(
                pod.cid, f"/run/netns/{pod.netns}", pod.result or None, args=pod.args
            )
            subprocess.run(["ip", "netns", "del", pod.netns], capture_output=True)
            assert call.rc == 0, (pod.node.name, call.out, call.stderr)
        self.created.clear()


@pytest.fixture
def pods() -> Iterator[Pods]:
    p = Pods([])
    yield p
    p.delete_all()


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[Api]:
    """The cluster's API as the admin; whatever a module's tests created through it is deleted after."""
    from tests.integration.cluster.kube import Api as ClusterApi  # kube.py imports Pod from here

    a = ClusterApi(cluster)
    try:
        yield a
    finally:
        a.delete_all()


@pytest.fixture(scope="module")
def spread(cluster: Cluster) -> Iterator[list[Pod]]:
    """One pod on every node, in one namespace (one logical switch across the nodes)."""
    p = Pods([])
    try:
        yield [p.add(n, namespace="spread", name=f"on-{n.name}") for n in cluster.nodes]
    finally:
        p.delete_all()
