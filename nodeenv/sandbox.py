"""`k8shost-node sandbox`: the scenario (nodeenv/scenarios/) on a cluster of 3 nodes, or on one node.

On a cluster (the default, `--nodes 3`) everything lives in its own run dir (`.run-sandbox/`, the
cluster's) and namespace prefix (`k8shs`), so it runs beside `make cluster-up` and a test session's
clusters:

- the cluster (nodeenv/cluster/cluster.py), its control part also running PlasmaCloud's volume
  service (the double, nodeenv/lightningstor.py; `control/store/`), one for the cluster, and
  each node's CSI plugin on it, so a volume written on one node is attached to another;
- `sandbox/`: what the scenario needs besides the cluster, in this namespace against the API double
  on loopback: project-controller (the cluster runs the IAM webhook the double authenticates tokens
  through, and node-controller, fiberlb- and netpol-controller as replicas on node1 and node2).

Then the scenario's parts in order, each step naming the node(s) it ran on, and everything stopped
again (by PID; the cluster's namespaces by name). `--nodes 1` is the single-node environment
(`make node-up`'s) instead, with the same parts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from common.plasmacloud_grpc import PlasmaCloudAuth
from csi.cleanup import release_under
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.control import Given
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.csi_component import CsiComponent
from nodeenv.daemons import start_foreground, unix_listening, wait_for
from nodeenv.node import Component, Node, NodeSettings, read_env_file
from nodeenv.plasmacloud_auth import ensure_dev_pki
from nodeenv.projects_component import ProjectsComponent
from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios import SCENARIOS

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO / ".run-sandbox"
DEFAULT_PREFIX = "k8shs"
OVERLAID = ("KUBECONFIG", "KUBE_API_URL", "OVN_NB_DB", "OVN_SB_DB", "LIGHTNINGSTOR_DIR")
"""Keys of a node's env replaced by the control part's (this namespace's view of the same thing)."""


class LightningStorComponent:
    """The volume service double as a daemon: `<run>/store` holds the volumes, `<run>/store/ls.sock`
    (TLS and IAM tokens only, with the DEVELOPMENT PlasmaCloud PKI of `<run>/plasmacloud`).
    node.env gains LIGHTNINGSTOR_ENDPOINT, LIGHTNINGSTOR_DIR, PLASMACLOUD_CA and PLASMACLOUD_TOKEN_FILE."""

    name = "lightningstor-double"

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes

    def start(self, node: Node) -> dict[str, str]:
        root = node.path("store", "x").parent
        pki = ensure_dev_pki(node.path("plasmacloud", "x").parent)
        argv = [sys.executable, "-m", "nodeenv.lightningstor", "--root", str(root), "--host", "",
                "--nodes", ",".join(self.nodes), "--pki", str(pki.dir)]  # fmt: skip
        _, proc = start_foreground(self.name, argv, node.path("lightningstor.log"), node.process_env(),
                                   node.daemons)  # fmt: skip
        wait_for(lambda: unix_listening(root / "ls.sock"), "the LightningStor double's socket", proc=proc)
        return {"LIGHTNINGSTOR_ENDPOINT": f"unix://{root / 'ls.sock'}", "LIGHTNINGSTOR_DIR": str(root),
                **pki.client_env()}  # fmt: skip

    def cleanup(self, node: Node) -> None:
        """Loop devices of its volumes a failed run left attached, mounts of them under the store."""
        if node.run_dir.exists():
            release_under(node.run_dir)


class SandboxCluster(Cluster):
    """The sandbox's cluster: LightningStor in its control part (started first), every node's CSI
    plugin on it."""

    def __init__(self, settings: ClusterSettings) -> None:
        super().__init__(settings)
        self.control.components = [*self.control.components, LightningStorComponent(settings.node_names())]

    def node_components(self, central: dict[str, str]) -> list[Component]:
        e = self.control.endpoints
        endpoint = e.get("LIGHTNINGSTOR_ENDPOINT", "")  # "" when only cleaning up
        auth = PlasmaCloudAuth.from_env(e) if endpoint else None
        return [CsiComponent(endpoint, auth) if isinstance(c, CsiComponent) else c
                for c in super().node_components(central)]  # fmt: skip


class ClusterSandbox:
    """The sandbox cluster and its `sandbox` part (see the module doc)."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.cluster = SandboxCluster(settings)
        self.control = Node(
            NodeSettings(run_dir=self.cluster.run_dir / "sandbox", runtime_dir=settings.runtime_dir), []
        )

    def up(self) -> None:
        if self.control.run_dir.exists():  # a kept or crashed sandbox's, before the cluster's cleanup
            self.control.down()
        self.cluster.up()
        env = read_env_file(self.cluster.env_file)
        first, store = self.cluster.nodes[0].env, self.cluster.control.endpoints
        stored = {k: v for k, v in store.items() if k.startswith(("LIGHTNINGSTOR_", "PLASMACLOUD_"))}
        given = {**env, **{k: first[k] for k in ("CLUSTER_DNS_IP", "CLUSTER_DOMAIN")}, **stored}
        self.control.components = [Given(given), ProjectsComponent()]
        self.control.up()

    def places(self) -> list[Place]:
        over = {k: v for k, v in self.control.endpoints.items() if k in OVERLAID}
        return [
            Place(n.name, n.netns, {**n.env, **over}, n.node.settings.install_root)
            for n in self.cluster.nodes
        ]

    def down(self) -> list[str]:
        """Stop the sandbox part and the cluster (by PID); the daemons stopped."""
        stopped = [f"sandbox/{name}" for name in self.control.down()] if self.control.run_dir.exists() else []
        return stopped + self.cluster.down()


def run_cluster(settings: ClusterSettings, *, keep: bool = False) -> int:
    sandbox = ClusterSandbox(settings)
    scn = Scenario(sandbox.control, cluster=sandbox.cluster)
    names = ",".join(settings.node_names())

    def up() -> None:
        sandbox.up()
        scn.places[:] = sandbox.places()

    up_step = f"cluster-up: {settings.nodes} nodes, OVN central, API double, LightningStor, controllers"
    return _run(scn, (up_step, up), ("cluster-down", sandbox.down), names, keep, f"{settings.nodes} nodes")


def run_single(node: Node, *, keep: bool = False) -> int:
    return _run(Scenario(node), ("node-up", node.up), ("node-down", node.down), "", keep, "one node")


def _run(
    scn: Scenario,
    up: tuple[str, Callable[[], object]],
    down: tuple[str, Callable[[], object]],
    on: str,
    keep: bool,
    what: str,
) -> int:
    """Up, every part of the scenario, the cleanups, down (unless `keep`); the table; 0 if all passed."""
    t0 = time.monotonic()
    ok, errors = True, []
    try:
        with scn.step(up[0], on=on):
            up[1]()
        for part in SCENARIOS:
            part.run(scn)
    except Exception:
        ok = False
    finally:
        errors = scn.run_cleanups()
        if not keep:
            try:
                with scn.step(down[0], on=on):
                    down[1]()
            except Exception:
                ok = False
    return _report(scn, ok, errors, time.monotonic() - t0, what)


def _report(scn: Scenario, ok: bool, errors: list[str], seconds: float, what: str) -> int:
    print(scn.table())
    for e in errors:
        print(f"cleanup error: {e}", file=sys.stderr)
    passed = ok and not errors and all(r.ok for r in scn.results)
    print(f"sandbox ({what}): {'PASSED' if passed else 'FAILED'} in {seconds:.1f} s")
    return 0 if passed else 1


def sandbox_settings(env: Mapping[str, str]) -> tuple[Path, str]:
    """The sandbox cluster's run dir and namespace prefix (env K8SHOST_SANDBOX_DIR, _PREFIX)."""
    return Path(env.get("K8SHOST_SANDBOX_DIR", DEFAULT_DIR)), env.get(
        "K8SHOST_SANDBOX_PREFIX", DEFAULT_PREFIX
    )
