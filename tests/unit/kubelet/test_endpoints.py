"""The runner's EndpointSlice controller against the API double: slices follow Services and Pods."""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.endpoints import CONTROLLER, DISCOVERY, MANAGED_BY, SERVICE_NAME, desired_slices, sync
from tests.kubeapi_fixture import KubeApiHandle

CORE = "/api/v1"


def pod(name: str, ip: str, ready: bool, app: str = "web", port_name: str = "http") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": app}},
        "spec": {"nodeName": "node-1", "containers": [
            {"name": "c", "image": "x", "ports": [{"name": port_name, "containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }  # fmt: skip


def service(target: Any = "http", selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "uid": "uid-svc"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"} if selector is None else selector,
                     "ports": [{"name": "http", "port": 80, "targetPort": target}]}}  # fmt: skip


def test_named_target_ports_group_pods_and_readiness_is_the_pods() -> None:
    pods = [pod("a", "10.0.0.2", True), pod("b", "10.0.0.3", False), pod("c", "10.0.0.4", True, app="x"),
            pod("d", "10.0.0.5", True, port_name="web")]  # fmt: skip
    no_port, sl = desired_slices(service(), pods)  # d lacks the named port: a slice without it
    assert no_port["ports"] == [] and [e["targetRef"]["name"] for e in no_port["endpoints"]] == ["d"]
    assert sl["metadata"]["labels"] == {SERVICE_NAME: "web", MANAGED_BY: CONTROLLER}
    assert sl["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert sl["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    got = {e["targetRef"]["name"]: (e["addresses"], e["conditions"]["ready"]) for e in sl["endpoints"]}
    assert got == {"a": (["10.0.0.2"], True), "b": (["10.0.0.3"], False)}
    # a numeric targetPort reaches every selected pod, d included
    (sl,) = desired_slices(service(8080), pods)
    assert {e["targetRef"]["name"] for e in sl["endpoints"]} == {"a", "b", "d"}


def test_no_selector_no_slice_and_nothing_selected_a_placeholder() -> None:
    assert desired_slices(service(selector={}), [pod("a", "10.0.0.2", True)]) == []
    (sl,) = desired_slices(service(), [])
    assert sl["endpoints"] == [] and sl["ports"] == []


def _pod_in_api(c: KubeClient, name: str, ip: str, ready: bool) -> None:
    p = pod(name, ip, ready)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {k: p["metadata"][k] for k in ("name", "labels")},
            "spec": p["spec"]}  # fmt: skip
    c.create(CORE, "pods", "default", body)
    c.patch_status(CORE, "pods", "default", name, p["status"])


def test_sync_creates_updates_and_deletes_slices(kube_api: KubeApiHandle) -> None:
    c = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    _pod_in_api(c, "a", "10.0.0.2", True)
    c.create(CORE, "services", "default", service())
    sync(c)

    def slices() -> list[dict[str, Any]]:
        return c.list(DISCOVERY, "endpointslices", "default", f"{SERVICE_NAME}=web")

    (sl,) = slices()
    assert [(e["addresses"], e["conditions"]["ready"]) for e in sl["endpoints"]] == [(["10.0.0.2"], True)]
    svc = c.get(CORE, "services", "default", "web")
    assert svc is not None and sl["metadata"]["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
    version = sl["metadata"]["resourceVersion"]
    sync(c)  # nothing changed: nothing written
    assert slices()[0]["metadata"]["resourceVersion"] == version
    c.patch_status(CORE, "pods", "default", "a", {"conditions": [{"type": "Ready", "status": "False"}]})
    sync(c)
    assert [e["conditions"]["ready"] for e in slices()[0]["endpoints"]] == [False]
    c.delete(CORE, "services", "default", "web")
    sync(c)
    assert slices() == []
