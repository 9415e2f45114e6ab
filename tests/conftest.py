"""Fixtures shared by every test tier.

Integration and e2e tests need root and the OVS/OVN binaries. In CI they must run,
never skip: when a prerequisite is missing the fixture fails the test loudly.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError, is_alive
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_stack import OvnStack, missing_prerequisites

pytest_plugins = [
    "tests.kubeapi_fixture",  # the `kube_api` fixture: the Kubernetes API double
    "tests.iam_fixture",  # the `iam` fixture: the IAM webhook as the double's token authenticator
    "tests.cni_agent_fixture",  # the `agent` fixture: PrismNET's agent on the session's OVN node
    "tests.rbac_coverage",  # controllers' recorded requests checked against daemonsets/ RBAC
    "tests.plasmacloud_fixture",  # `plasmacloud_pki`: the PlasmaCloud service doubles' TLS and IAM key
]


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test needs root (network namespaces, veth, loop devices, mounts); run as root")


def require_ovn() -> None:
    require_root()
    missing = missing_prerequisites()
    if missing:
        pytest.fail(f"OVS/OVN prerequisites missing: {', '.join(missing)}; run `make setup` and `make ovs`")


@pytest.fixture(scope="session")
def short_tmp() -> Iterator[Path]:
    """A short temp dir: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="k8sh-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def ovn_node(short_tmp: Path) -> Iterator[Node]:
    """A private OVS + OVN node environment (bridge `br-k8stest`), shared by a test session.

    It has its own run dir and bridge. The userspace datapath allows one ovs-vswitchd per
    machine, so while `make node-up` (or another test session) runs, this fails with a clear
    message instead of half-starting.
    """
    require_ovn()
    settings = NodeSettings(
        run_dir=short_tmp / "node",
        bridge="br-k8stest",
        system_id="k8shost-test",
        install_root=short_tmp / "root",
        # K8SHOST_OVN_CENTRAL=raft runs the session against 3-member NB/SB clusters and two northd
        ovn_central=os.environ.get("K8SHOST_OVN_CENTRAL", "standalone"),
    )
    node = Node(settings, [OvnStack()])
    node.up()
    records = node.daemons.load()
    try:
        yield node
    finally:
        node.down()
        if node.evidence:
            pytest.fail(f"node environment: {'; '.join(map(str, node.faults))}; evidence in {node.evidence}")
        # `make node-down` must leave nothing behind: checked at the end of every session.
        left = [r.name for r in records if is_alive(r)]
        left += [settings.bridge] if Path(f"/sys/class/net/{settings.bridge}").exists() else []
        left += [str(p) for p in (settings.run_dir, node.run_dir) if p.exists() or p.is_symlink()]  # + alias
        if left:
            pytest.fail(f"node environment teardown left behind: {', '.join(left)}")


MACHINE_LOCK = Path("/tmp/k8shost-ovn.lock")
"""Held by a test session with tests that need the machine's own datapath (integration, image, e2e
outside tests/integration/cluster), and by the benches that start a node in the machine's own
namespace (`flock /tmp/k8shost-ovn.lock make bench ...`): one `ovs-netdev` per machine."""
TEST_CLUSTER_LOCK = Path("/tmp/k8shost-test-cluster.lock")
"""Held by a test session with cluster tests: the session cluster's prefix (k8sht) is one per
machine (the benches' clusters have their own prefixes and do not take it)."""
MACHINE_TIERS = {"integration", "image", "e2e"}


OVN_TIERS = {"integration", "e2e"}
"""Tiers whose tests start the node environment's OVN/OVS on this machine (tests/image/ runs the image's)."""


def _tier(item: pytest.Item, tests: Path) -> str:
    parts = item.path.relative_to(tests).parts if item.path.is_relative_to(tests) else ()
    return parts[0] if parts else ""


def _locks_for(items: list[pytest.Item], tests: Path) -> list[Path]:
    locks = set()
    for item in items:
        parts = item.path.relative_to(tests).parts if item.path.is_relative_to(tests) else ()
        if parts and parts[0] in MACHINE_TIERS:
            locks.add(TEST_CLUSTER_LOCK if parts[:2] == ("integration", "cluster") else MACHINE_LOCK)
    return sorted(locks)  # one order for every session: no deadlock between two


def _hold(lock: Path, stack: ExitStack) -> None:
    f = stack.enter_context(lock.open("a"))
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        t0 = time.monotonic()
        print(f"\nwaiting for {lock} (another session or bench holds it)", file=sys.__stderr__, flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
        print(f"got {lock} after {time.monotonic() - t0:.0f} s", file=sys.__stderr__, flush=True)
    stack.callback(fcntl.flock, f, fcntl.LOCK_UN)


_held = ExitStack()


def pytest_collection_finish(session: pytest.Session) -> None:
    """One session at a time on the machine's userspace datapath and one on the test cluster's
    prefix: a second session (another checkout, a bench under the lock) waits here, saying so,
    instead of failing half-started or tearing the other's cluster down as stale; taken once the
    tests are collected and before any runs (outside every test's timeout). Unit-only sessions take
    no lock; cluster-only sessions only the cluster's."""
    tests = Path(str(session.config.rootpath)) / "tests"
    if any(_tier(item, tests) in OVN_TIERS for item in session.items):
        try:
            ovn_tree.activate()  # the OVN tree (build/ovn-trixie) made, or no test of these tiers runs
        except DaemonError as e:
            raise pytest.UsageError(f"{e} (the integration and e2e tests run its OVN/OVS only)") from e
    for lock in _locks_for(session.items, tests):
        _hold(lock, _held)


def pytest_sessionstart(session: pytest.Session) -> None:
    """The OVN tree's bin/ first in PATH for the whole session (nodeenv/ovn_tree.py), when it is
    made: every OVN/OVS program a test or fixture starts by name is the tree's. A unit-only session
    runs without it; one with integration or e2e tests requires it (pytest_collection_finish)."""
    ovn_tree.activate(required=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _held.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `own_ovs` boot the node's OVS themselves (from the image), and one ovs-vswitchd
    with the userspace datapath runs per machine: they run first, before any test starts the
    session's OVN node (`ovn_node` stays up until the session ends)."""
    items.sort(key=lambda item: item.get_closest_marker("own_ovs") is None)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A daemon's main() run in-process (common.jsonlog.setup_logging) replaces the root logger's
    handlers with one on the test's captured stderr, which pytest closes after the test: every later
    log line (threads of later tests included) would end in "Logging error". Put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


STACK_PROBED = ("ovs-vswitchd", "ovn-controller")
"""Asked `version` after every test on the OVN node: the datapath's daemons (the others: alive?)."""


@pytest.fixture(autouse=True)
def _node_daemons_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the session's OVN node: every daemon alive and ovs-vswitchd/ovn-controller
    answering, else the test errors naming the daemon and where its evidence was kept (logs,
    conntrack, coverage, core + backtrace); later tests fail at once instead of timing out."""
    if "ovn_node" not in request.fixturenames:
        yield
        return
    node: Node = request.getfixturevalue("ovn_node")
    if node.evidence:
        pytest.fail(
            f"node environment broken earlier ({'; '.join(map(str, node.faults))}); see {node.evidence}"
        )
    yield
    found = node.check(probe=STACK_PROBED)
    if found:
        pytest.fail(f"{'; '.join(map(str, found))}: evidence kept in {node.evidence}")
