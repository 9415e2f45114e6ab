"""The runner as kubelet while the API is unreachable: a container that dies is still restarted
after the back-off, from the pod and the ConfigMap the node already read (kubelet's pod workers and
object cache). This is what happens on a node when ovs-vswitchd, which holds the node's address on
br-phy with the userspace datapath, dies. Until it is restarted the node cannot reach the API."""

from __future__ import annotations

import logging
from typing import Any

from nodeenv.image.build import image_name
from nodeenv.kubelet.apiclient import KubeClient
from tests.conftest import require_root
from tests.integration.kubelet.conftest import wait_for
from tests.integration.kubelet.test_bad_input import deployment

NS = "default"


def test_a_crashed_container_restarts_while_the_api_is_unreachable(kube_api: Any, runner_factory: Any,
                                                                   caplog: Any) -> None:  # fmt: skip
    require_root()
    caplog.set_level(logging.WARNING, logger="nodeenv.kubelet")
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "offline", "namespace": NS},
          "data": {"SECONDS_": "600"}}  # fmt: skip
    client.request("POST", f"/api/v1/namespaces/{NS}/configmaps", cm)
    env = [{"name": "S", "valueFrom": {"configMapKeyRef": {"name": "offline", "key": "SECONDS_"}}}]
    container = {"image": image_name(), "command": ["/bin/sh", "-c", "exec sleep $S"], "env": env}
    client.request("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deployment("offline", container))
    runner = runner_factory()

    def running() -> tuple[str, str] | None:
        rts = [rt for rt in list(runner.pods.values()) if rt.key.startswith(f"{NS}/offline-")]
        if not rts or not rts[0].main or not rts[0].main[0].container_id:
            return None
        return rts[0].cname("main"), rts[0].main[0].container_id

    name, first = wait_for(running, 90, "the container running")
    # the API unreachable from here on: the runner's one client (its events and storage share it) now
    # points at a closed port, as a node whose route to the API went with its br-phy
    object.__setattr__(runner.client, "server", "https://127.0.0.1:1")
    wait_for(lambda: any("sync failed" in r.getMessage() for r in caplog.records), 20, "a failed sync")
    assert runner.podman("kill", name).returncode == 0

    def restarted() -> str | None:
        ids = runner.podman("ps", "--filter", f"name=^{name}$", "--format", "{{.ID}}").stdout.split()
        return ids[0] if ids and not first.startswith(ids[0]) else None

    wait_for(restarted, 60, "the killed container restarted without the API")  # back-off 10 s
    assert any("CrashLoopBackOff" in r.getMessage() or "exited" in r.getMessage() for r in caplog.records)
