"""The overlay applied to the API double, the cluster admin's Secrets made (README install step 4),
and a runner for one node: the machine's root network namespace, hostPaths under a private root.
And `booted`: one `boot --nodes 3` shared by the modules that take it, run together at the end of
the package's tests (SHARED_BOOT_ORDER), removed with `down` after the last of them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.image.store import ImageStore
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.runner import Runner, RunnerSettings
from nodeenv.kubelet.teardown import Steps
from nodeenv.ovn_pki import MANIFEST_IDENTITIES, OvnPki, manifest_pki, secret_args
from nodeenv.plasmacloud_auth import DevPki
from tests.conftest import require_root
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubeapi.test_kubeapi_overlay import OVERLAY, install_crds
from tests.integration.kubelet.boot_session import PREFIX, Booted, booted_cluster
from tests.kubeapi_fixture import KubeApiHandle

NS = "kube-system"
SHARED_BOOT_ORDER = ("test_boot_nodes.py", "test_boot_monitoring.py", "test_kubectl_reach.py",
                     "test_admin_kubectl.py", "test_boot_node_wiring.py",
                     "test_boot_powerloss.py")  # fmt: skip
"""The modules on the shared boot, in the order they run (one not named runs before the last): the
boot's own output checked first; each removes what it made (a namespace, the workloads of its
table) at its end. test_boot_node_wiring.py kills ovn-controller on node2 (its container's restart
brings it back, which the test waits for); test_boot_powerloss.py is last: it cuts the power of
the whole cluster and boots it again from its disks."""
SHARED_BOOT_TIMEOUT = 900
"""For the first shared test (its setup boots, 3-6 min on a loaded machine) and the last (its
teardown runs `down`)."""


@pytest.fixture(scope="package")
def booted() -> Iterator[Booted]:
    """The package's one `boot --nodes 3` (prefix k8shkt): removed when the session leaves the package,
    i.e. after the last shared module (pytest_collection_modifyitems below puts them there)."""
    with booted_cluster(PREFIX) as b:
        yield b


def _shared_rank(item: pytest.Item) -> int:
    name = item.path.name
    return SHARED_BOOT_ORDER.index(name) * 2 if name in SHARED_BOOT_ORDER else len(SHARED_BOOT_ORDER) * 2 - 3


@pytest.hookimpl(trylast=True)  # after tests/conftest.py's own_ovs-first sort
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the shared boot together, after the package's other tests (so the boot is up only
    while they run) and in SHARED_BOOT_ORDER; each module's own order kept."""
    here = Path(__file__).parent
    shared = sorted((i for i in items if "booted" in getattr(i, "fixturenames", ())), key=_shared_rank)
    if not shared:
        return
    rest = [i for i in items if i not in set(shared)]
    at = max((n + 1 for n, i in enumerate(rest) if i.path.parent == here), default=0)
    items[:] = [*rest[:at], *shared, *rest[at:]]
    for item in {shared[0], shared[-1]}:
        item.add_marker(pytest.mark.timeout(SHARED_BOOT_TIMEOUT), append=False)


def webhook_secrets(api: KubeApiHandle, pki: Path) -> dict[str, Any]:
    """`iam-webhook gen-dev-pki` and the three objects README install step 4 creates from it."""
    url = "https://127.0.0.1:3000/apis/iam.plasmacloud.io/v1/authenticate"
    out = subprocess.run([".venv/bin/iam-webhook", "gen-dev-pki", "--out", str(pki), "--server-name",
                          "127.0.0.1", "--url", url],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    files: dict[str, Any] = json.loads(out)
    kubectl(api, "-n", NS, "create", "secret", "tls", "iam-webhook-tls",
            f"--cert={pki / 'server.crt'}", f"--key={pki / 'server.key'}")  # fmt: skip
    kubectl(
        api, "-n", NS, "create", "secret", "generic", "iam-webhook-client-ca", f"--from-file={pki / 'ca.crt'}"
    )
    kubectl(
        api,
        "-n",
        NS,
        "create",
        "configmap",
        "iam-webhook-keys",
        f"--from-file=keys.pem={files['signing_pub']}",
    )
    return files


def ovn_secrets(api: KubeApiHandle, directory: Path, servers: list[str]) -> OvnPki:
    """The OVN CA and Secrets ovn-tls-<component> README "Installing on k3s" has the admin create."""
    pki = manifest_pki(directory, servers)
    for identity in MANIFEST_IDENTITIES:
        kubectl(api, "-n", NS, *secret_args(pki, identity))
    return pki


@pytest.fixture
def applied(kube_api: KubeApiHandle, tmp_path: Path, plasmacloud_pki: DevPki) -> Path:
    require_root()
    install_crds(kube_api, tmp_path)
    kubectl(kube_api, "apply", "-k", str(OVERLAY))
    pki = tmp_path / "pki"
    webhook_secrets(kube_api, pki)
    ovn_secrets(kube_api, tmp_path / "ovn-pki", ["127.0.0.1"])
    pc = plasmacloud_pki
    kubectl(kube_api, "-n", NS, "create", "secret", "generic", "plasmacloud-credentials",
            f"--from-file=ca.crt={pc.ca}", f"--from-file=token={pc.token}")  # fmt: skip
    return pki


def start_runner(api: KubeApiHandle, root: Path, **kw: Any) -> tuple[Runner, Callable[[], None]]:
    """A runner for node-1 (hostPaths under `root`/host) on its own thread; and what stops it."""
    store = ImageStore.from_env(os.environ)
    settings = RunnerSettings(node_name="node-1", node_root=root / "host", state_dir=root / "pods",
                              podman_env={"HOME": str(root), **store.env()}, **kw)  # fmt: skip
    runner = Runner(settings, KubeClient.from_kubeconfig(api.kubeconfig))
    stop = threading.Event()
    t = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    t.start()

    def halt() -> None:
        stop.set()
        t.join(30)
        runner.shutdown()

    return runner, halt


@pytest.fixture
def runner_factory(kube_api: KubeApiHandle, short_tmp: Path) -> Iterator[Callable[..., Runner]]:
    started: list[Callable[[], None]] = []

    def start(**kw: Any) -> Runner:
        runner, halt = start_runner(kube_api, short_tmp / f"kubelet{len(started)}", **kw)
        started.append(halt)
        return runner

    yield start
    steps = Steps("runner_factory")
    for i, halt in enumerate(started):  # each runner stopped whatever the one before raised
        with steps.step(f"runner {i}"):
            halt()
    steps.done()


def wait_for(check: Callable[[], Any], timeout: float, what: str, seen: Callable[[], str] = str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:g}s waiting for {what}; {seen()}")


def pods(api: KubeApiHandle) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in api.objects("pods", NS)}


logging.getLogger("nodeenv.kubelet").setLevel(logging.INFO)
