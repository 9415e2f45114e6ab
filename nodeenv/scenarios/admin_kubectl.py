"""An admin's everyday kubectl against the API double, as against kube-apiserver: `kubectl create
deployment` (kubectl sends built-in kinds as protobuf) stores what the JSON form would; a new
namespace has its `default` ServiceAccount and `kubectl create token` works for it; `kubectl get
apiservices` lists the local groups Available."""

from __future__ import annotations

import json

from nodeenv.scenario import Scenario
from nodeenv.scenarios.kubeapi import _kubectl

NS = "sandbox-admin"


def run(scn: Scenario) -> None:
    with scn.step("admin kubectl: a namespace gets its default ServiceAccount, and a token for it"):
        _kubectl(scn, "create", "namespace", NS)
        scn.defer(lambda: _kubectl(scn, "delete", "namespace", NS, "--wait=false"))
        _kubectl(scn, "-n", NS, "get", "serviceaccount", "default")
        if not _kubectl(scn, "-n", NS, "create", "token", "default").strip():
            raise RuntimeError("kubectl create token default: no token")
    with scn.step("admin kubectl: create deployment (a protobuf body) stores the Deployment"):
        _kubectl(scn, "-n", NS, "create", "deployment", "day", "--image=registry.k8s.io/pause:3.10",
                 "--replicas=2")  # fmt: skip
        dep = json.loads(_kubectl(scn, "-n", NS, "get", "deployment", "day", "-o", "json"))
        containers = dep["spec"]["template"]["spec"]["containers"]
        if dep["spec"]["replicas"] != 2 or containers[0]["image"] != "registry.k8s.io/pause:3.10":
            raise RuntimeError(f"stored Deployment differs from the command: {dep['spec']}")
    with scn.step("admin kubectl: get apiservices lists the local groups Available"):
        rows = _kubectl(scn, "get", "apiservices").splitlines()
        apps = next((r.split() for r in rows if r.startswith("v1.apps ")), [])
        if apps[1:3] != ["Local", "True"]:
            raise RuntimeError(f"v1.apps not Local/True: {rows[:5]}")
