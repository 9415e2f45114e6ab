"""Fixtures shared by every test tier.

Integration and e2e tests need root and the OVS/OVN binaries. In CI they must run,
never skip: when a prerequisite is missing the fixture fails the test loudly.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_stack import OvnStack, missing_prerequisites


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test needs root (network namespaces, veth, loop devices, mounts); run as root")


def require_ovn() -> None:
    require_root()
    missing = missing_prerequisites()
    if missing:
        pytest.fail(f"OVS/OVN prerequisites missing: {', '.join(missing)}; run `make setup`")


@pytest.fixture(scope="session")
def short_tmp() -> Iterator[Path]:
    """A short temp dir: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="k8sh-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def ovn_node(short_tmp: Path) -> Iterator[Node]:
    """A private OVS + OVN node environment (bridge `br-k8stest`), shared by a test session.

    It uses its own run dir and bridge, so it never collides with `make node-up`.
    """
    require_ovn()
    settings = NodeSettings(
        run_dir=short_tmp / "node",
        bridge="br-k8stest",
        system_id="k8shost-test",
        install_root=short_tmp / "root",
    )
    node = Node(settings, [OvnStack()])
    node.up()
    try:
        yield node
    finally:
        node.down()
