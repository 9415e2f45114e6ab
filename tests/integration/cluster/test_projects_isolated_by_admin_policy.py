"""Projects isolated by the platform's own AdminNetworkPolicies, whatever tenants do to their policies
(issue 28 item 2; README "AdminNetworkPolicy and BaselineAdminNetworkPolicy").

project-controller (run here against the cluster's API, as its Deployment would) writes each project's
isolation ANP, the platform DNS ANP and the BANP. Two projects of one org, a pod of each on different
nodes. A project admin, with an IAM token and kubectl, deletes every NetworkPolicy of its namespace
(project-controller stopped first, so nothing puts them back), then writes one allowing everything:
the other project is still refused; the cluster DNS still answers; the tenant cannot touch the ANPs or
the BANP (403). The platform's ANP taken away by the cluster admin, the same probe gets through: the
refusal was the ANP's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers.projects.admin_policies import DNS_POLICY, project_policy_name
from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import Api, eventually, namespace, pod_object
from tests.integration.controllers.netpol.traffic import EchoServers, reaches

ORG = "org-iso"
PROJECTS = {"iso-a": "proj-iso-a", "iso-b": "proj-iso-b"}
LABELS = "plasmacloud.io/org-id", "plasmacloud.io/project-id", "plasmacloud.io/tenant-type"
GROUP = "/apis/policy.networking.k8s.io/v1alpha1"
ALLOW_ALL = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "open"},
    "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]},
}


class Controller:
    """project-controller as a process of this test (killed by its PID)."""

    def __init__(self, kubeconfig: str, log: Path) -> None:
        argv = [
            sys.executable,
            "-m",
            "controllers.projects.main",
            "--kubeconfig",
            kubeconfig,
            "--leader-elect=false",
            "--metrics-address=off",
        ]
        self.out = log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.out.close()


def kubectl(
    cluster: Cluster, *args: str, token: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl with the admin kubeconfig's server and CA; a tenant's --token replaces the admin's."""
    kubeconfig = read_env_file(cluster.env_file)["KUBECONFIG"]
    argv = [
        "kubectl",
        f"--kubeconfig={kubeconfig}",
        "--request-timeout=10s",
        *(["--token", token] if token else []),
    ]
    return subprocess.run([*argv, *args], input=stdin, capture_output=True, text=True, timeout=60)


def mint(cluster: Cluster, sub: str, project: str) -> str:
    argv = [sys.executable, "-m", "webhook.main", "mint", "--sub", sub, "--org", ORG, "--project", project]
    out = subprocess.run(argv, capture_output=True, text=True, env=cluster.control.process_env(), timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def projects(
    cluster: Cluster, api: Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, Pod], Controller]]:
    n1, n2, n3 = cluster.nodes
    ctrl = Controller(read_env_file(cluster.env_file)["KUBECONFIG"], tmp_path_factory.mktemp("pc") / "pc.log")
    pods, servers = Pods([]), None
    try:
        for ns, project in PROJECTS.items():
            api.create(namespace(ns, dict(zip(LABELS, (ORG, project, "project"), strict=True))))
        out = {
            "a-web": pods.add(n1, "iso-a", "a-web"),
            "a-client": pods.add(n2, "iso-a", "a-client"),
            "b-client": pods.add(n3, "iso-b", "b-client"),
        }
        for name, pod in out.items():
            api.create(pod_object(pod, {"app": name}))
        servers = EchoServers(out["a-web"].netns, (8080,), ())
        yield out, ctrl
    finally:
        ctrl.stop()
        if servers is not None:
            servers.close()
        for name in [*(project_policy_name(p) for p in PROJECTS.values()), DNS_POLICY]:
            kubectl(cluster, "delete", "adminnetworkpolicy", name, "--ignore-not-found")
        kubectl(cluster, "delete", "baselineadminnetworkpolicy", "default", "--ignore-not-found")
        api.delete_all()
        pods.delete_all()


def _ready(api: Api, plural: str, name: str) -> bool:
    try:
        obj = api.client.request("GET", f"{GROUP}/{plural}/{name}")
    except Exception:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _web(projects: dict[str, Pod], src: str, tries: int = 1) -> bool:
    return any(reaches(projects[src].netns, projects["a-web"].ip, "tcp", 8080) for _ in range(tries))


def _dns_answers(pod: Pod) -> bool:
    out = pod.run("dig", "+time=1", "+tries=3", "@10.96.0.10", "kubernetes.default.svc.cluster.local")
    return out.returncode == 0 and "status:" in out.stdout


def test_a_tenant_without_policies_stays_isolated(
    cluster: Cluster, api: Api, projects: tuple[dict[str, Pod], Controller]
) -> None:
    pods, ctrl = projects
    wanted = [("adminnetworkpolicies", project_policy_name(p)) for p in PROJECTS.values()]
    wanted += [("adminnetworkpolicies", DNS_POLICY), ("baselineadminnetworkpolicies", "default")]
    ready = eventually(lambda: [w for w in wanted if not _ready(api, *w)], lambda left: not left, timeout=30)
    assert not ready, f"not written or not Ready: {ready}"
    assert eventually(lambda: _web(pods, "a-client"), bool), "same project refused under the defaults"
    assert not _web(pods, "b-client"), "another project reached a-web under the defaults"

    # project-controller stopped: nothing repairs the tenants' namespaces while they do their worst
    ctrl.stop()
    tokens = {ns: mint(cluster, f"user-{ns}-admin", project) for ns, project in PROJECTS.items()}
    for ns, token in tokens.items():
        out = kubectl(cluster, "delete", "networkpolicy", "--all", "-n", ns, token=token)
        assert out.returncode == 0, out.stderr
        assert kubectl(cluster, "get", "networkpolicy", "-n", ns, "-o", "name", token=token).stdout == ""
    if eventually(lambda: _web(pods, "a-client"), lambda ok: not ok, timeout=30):
        _dump(cluster)
    assert not _web(pods, "a-client"), "BANP did not close iso-a"
    assert not _web(pods, "b-client"), "iso-b reached iso-a with no NetworkPolicy at all"
    assert _dns_answers(pods["b-client"]), "the cluster DNS did not answer a project without policies"

    for ns, token in tokens.items():
        body = json.dumps({**ALLOW_ALL, "metadata": {"name": "open", "namespace": ns}})
        out = kubectl(cluster, "create", "-f", "-", token=token, stdin=body)
        assert out.returncode == 0, out.stderr
    assert eventually(lambda: _web(pods, "a-client", 2), bool), (
        "an allow-all policy did not open iso-a inside"
    )
    assert not _web(pods, "b-client"), "allow-all policies on both sides opened iso-b -> iso-a"
    assert _dns_answers(pods["b-client"])

    # the tenant cannot change the platform's policies (cluster-scoped, no ClusterRole grants them)
    b = tokens["iso-b"]
    for argv in (
        ["delete", "adminnetworkpolicy", project_policy_name("proj-iso-b")],
        ["delete", "baselineadminnetworkpolicy", "default"],
        [
            "patch",
            "adminnetworkpolicy",
            project_policy_name("proj-iso-a"),
            "--type=merge",
            "-p",
            '{"spec":{"priority":99}}',
        ],
        ["label", "adminnetworkpolicy", DNS_POLICY, "x=y"],
    ):
        out = kubectl(cluster, *argv, token=b)
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (argv, out.stderr)

    # the cluster admin takes the isolation away: the same probe gets through (the refusal was the ANP's)
    for p in PROJECTS.values():
        assert kubectl(cluster, "delete", "adminnetworkpolicy", project_policy_name(p)).returncode == 0
    assert eventually(lambda: _web(pods, "b-client"), bool), "still refused without the project ANPs"


def _dump(cluster: Cluster) -> None:
    """On a failure: what the NB holds and what netpol-controller said."""
    from tests.integration.cluster.kube import nbctl

    print(nbctl(cluster, "--columns=name,ports,acls,external_ids", "list", "Port_Group"))
    print(nbctl(cluster, "--columns=priority,direction,match,action,external_ids", "list", "ACL"))
    print(nbctl(cluster, "--columns=name,addresses", "list", "Address_Set"))
    for n in cluster.nodes:
        log = n.node.path("netpol-controller", "netpol-controller.log")
        if log.exists():
            print(n.name, log.read_text()[-5000:])
