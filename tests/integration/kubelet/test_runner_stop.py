"""A pod stopped by the runner (its shutdown, as `make down` stops every node): every container of
it removed, init containers included, in one podman call (kubelet kills a pod's containers in
parallel; a podman call each waited on the store's lock in turn and made `down` of a 3-node boot
outlast its runners' 120 s)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from nodeenv.image.build import image_name
from nodeenv.image.store import ImageStore
from nodeenv.kubelet.apiclient import KubeClient
from tests.conftest import require_root
from tests.integration.kubelet.conftest import start_runner, wait_for
from tests.integration.kubelet.test_bad_input import NS, deployment


def containers_of(uid: str) -> list[dict[str, Any]]:
    store = ImageStore.from_env(os.environ)
    out = store("ps", "-a", "--format", "json", "--filter", f"label=io.kubernetes.pod.uid={uid}")
    return list(json.loads(out or "[]"))


def test_shutdown_removes_every_container_of_a_pod(kube_api: Any, short_tmp: Path) -> None:
    require_root()
    sleeper = {"image": image_name(), "command": ["sleep", "600"]}  # PID 1: SIGTERM ignored, -t 2 then KILL
    obj = deployment("stopped", sleeper)
    spec = obj["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "init", "image": image_name(), "command": ["true"]}]
    spec["containers"].append({"name": "side", **sleeper})
    KubeClient.from_kubeconfig(kube_api.kubeconfig).request(
        "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", obj
    )
    _, halt = start_runner(kube_api, short_tmp / "stop")
    try:

        def running() -> str | None:
            for p in kube_api.objects("pods", NS):
                states = [s.get("state", {}) for s in p.get("status", {}).get("containerStatuses", [])]
                if len(states) == 2 and all("running" in s for s in states):
                    return str(p["metadata"]["uid"])
            return None

        uid = wait_for(running, 120, "the pod's two containers running")
        assert len(containers_of(uid)) >= 2, containers_of(uid)
    finally:
        started = time.monotonic()
        halt()
        took = time.monotonic() - started
        print(f"\nrunner shutdown (one pod, 2 running containers ignoring SIGTERM): {took:.1f} s")
    left = containers_of(uid)
    assert not left, [c["Names"] for c in left]
