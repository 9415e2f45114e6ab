"""The overlay applied to the API double, the cluster admin's Secrets made (README install step 4),
and a runner for one node: the machine's root network namespace, hostPaths under a private root."""

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
from nodeenv.plasmacloud_auth import DevPki
from tests.conftest import require_root
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubeapi.test_kubeapi_overlay import OVERLAY, install_crds
from tests.kubeapi_fixture import KubeApiHandle

NS = "kube-system"


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


@pytest.fixture
def applied(kube_api: KubeApiHandle, tmp_path: Path, plasmacloud_pki: DevPki) -> Path:
    require_root()
    install_crds(kube_api, tmp_path)
    kubectl(kube_api, "apply", "-k", str(OVERLAY))
    pki = tmp_path / "pki"
    webhook_secrets(kube_api, pki)
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
    for halt in started:
        halt()


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
