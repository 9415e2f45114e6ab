"""flashdns-controller and project-controller booted from the image by the runner on the session's OVN
node (PrismNET pod network, their service accounts' tokens, the API double as the cluster) doing
their job for a user of the official `kubernetes` client: a Service's DNS name answered by dig at
the controller's DNS server (its pod IP, port 53: the endpoint kube-proxy would send the cluster DNS
Service's 10.96.0.10 to), and a project namespace getting the project's RBAC, quotas, limits and
network policies, with the overlay's template ConfigMap in force."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from controllers.projects.template import ORG_LABEL, PROJECT_LABEL, project_group
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.sandbox import node_cni
from tests.cni_agent_fixture import Agent
from tests.integration.kubelet.conftest import pods, wait_for
from tests.integration.kubelet.pod_network import api_on_management_port, keep_only
from tests.integration.kubelet.test_boot_fast import conditions
from tests.kubeapi_fixture import KubeApiHandle

WORKLOADS = ("flashdns-controller", "project-controller")


@pytest.fixture
def kube_api(agent: Agent, tmp_path: Path, kube_api_config: ApiConfig) -> Iterator[KubeApiHandle]:
    with api_on_management_port(agent, tmp_path, kube_api_config) as api:
        yield api


def dig(server: str, name: str, rtype: str = "A") -> tuple[str, list[str]]:
    """(status, answers) of `dig @server name rtype`."""
    out = subprocess.run(["dig", f"@{server}", "+time=2", "+tries=1", "+noall", "+comments", "+answer",
                          name, rtype], capture_output=True, text=True, timeout=10).stdout  # fmt: skip
    status = out.split("status: ", 1)[1].split(",", 1)[0] if "status: " in out else "no answer: " + out
    answers = [line.split()[-1] for line in out.splitlines() if line and not line.startswith(";")]
    return status, answers


def test_flashdns_answers_a_service_and_projects_get_their_objects(
    kube_api: KubeApiHandle, applied: Path, runner_factory: Any, agent: Agent
) -> None:
    keep_only(kube_api, (f"deployment.apps/{w}" for w in WORKLOADS))
    runner_factory(cni=node_cni(agent.env), sandbox_retry=1.0)

    def all_ready() -> dict[str, Any] | None:
        ps = pods(kube_api)
        ready = {n: p for n, p in ps.items() if conditions(p).get("Ready") == "True"}
        all_ready.last = sorted(ready)  # type: ignore[attr-defined]
        return ready if len(ready) == len(WORKLOADS) else None

    ps = wait_for(all_ready, 60, "flashdns-controller and project-controller Ready",
                  lambda: f"ready: {all_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
    dns_ip = next(p["status"]["podIP"] for n, p in ps.items() if n.startswith("flashdns-controller-"))
    api = config.new_client_from_config(config_file=str(kube_api.kubeconfig))
    core, rbac, net = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.NetworkingV1Api(api)

    # a Service created as a user creates it: its name and SRV answered, then gone with it
    ports = [client.V1ServicePort(name="http", port=80)]
    body = client.V1Service(metadata=client.V1ObjectMeta(name="web"),
                            spec=client.V1ServiceSpec(selector={"app": "web"}, ports=ports))  # fmt: skip
    svc = core.create_namespaced_service("default", body)
    name = "web.default.svc.cluster.local"
    answer = wait_for(lambda: dig(dns_ip, name)[1], 15, f"{name} answered by {dns_ip}",
                      lambda: f"dig: {dig(dns_ip, name)}")  # fmt: skip
    assert answer == [svc.spec.cluster_ip], answer
    status, srv = dig(dns_ip, "_http._tcp." + name, "SRV")
    assert status == "NOERROR" and srv == [name + "."], (status, srv)
    assert dig(dns_ip, "nope.default.svc.cluster.local")[0] == "NXDOMAIN"
    core.delete_namespaced_service("web", "default")
    wait_for(lambda: dig(dns_ip, name)[0] == "NXDOMAIN", 15, f"{name} gone from DNS with the Service")

    # a project created: its namespace gets the objects README "NetworkPolicy and tenancy" lists
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name="team-a", labels={PROJECT_LABEL: "p-1", ORG_LABEL: "org-1"})))  # fmt: skip

    def project_objects() -> dict[str, set[str]]:
        got = {
            "roles": {r.metadata.name for r in rbac.list_namespaced_role("team-a").items},
            "rolebindings": {b.metadata.name for b in rbac.list_namespaced_role_binding("team-a").items},
            "resourcequotas": {q.metadata.name for q in core.list_namespaced_resource_quota("team-a").items},
            "limitranges": {x.metadata.name for x in core.list_namespaced_limit_range("team-a").items},
            "networkpolicies": {x.metadata.name for x in net.list_namespaced_network_policy("team-a").items},
        }
        project_objects.last = got  # type: ignore[attr-defined]
        return got

    roles = {"org-admin", "project-admin", "project-viewer"}
    want = {"roles": roles, "rolebindings": {f"{r}-binding" for r in roles},
            "limitranges": {"project-limits"},
            "resourcequotas": {"project-compute-quota", "project-storage-quota", "project-object-quota"},
            "networkpolicies": {"default-deny-all", "allow-same-project"}}  # fmt: skip
    wait_for(lambda: project_objects() == want, 20, "the project's objects in team-a",
             lambda: f"present: {project_objects.last}")  # type: ignore[attr-defined]  # fmt: skip
    binding = rbac.read_namespaced_role_binding("project-admin-binding", "team-a")
    assert [(s.kind, s.name) for s in binding.subjects] == [("Group", project_group("p-1"))]
    quota = core.read_namespaced_resource_quota("project-object-quota", "team-a")
    assert quota.spec.hard["services.loadbalancers"] == "5"  # the overlay's project-template ConfigMap
