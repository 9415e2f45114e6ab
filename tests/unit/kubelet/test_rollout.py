"""kube-controller-manager's workload controllers as the runner plays them (nodeenv/kubelet/rollout/),
against the API double and driven by kubectl itself, with a stand-in kubelet marking every bound Pod
Running and Ready: Deployments through ReplicaSets with revisions (RollingUpdate within
maxSurge/maxUnavailable, Recreate, scale, history limit, undo, restart), DaemonSets and StatefulSets
with their ControllerRevisions and rolling updates, the status and conditions `kubectl rollout
status` and `kubectl get` read, and the garbage collector's cascade."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from typing import Any

import pytest

from nodeenv.kubelet import workloads
from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.kubelet.rollout import deployments
from nodeenv.kubelet.rollout.plan import Plan
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle

CORE, APPS, NS = "/api/v1", "/apis/apps/v1", "default"
Obj = dict[str, Any]
READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


class Cluster:
    def __init__(self, api: KubeApiHandle, nodes: int = 3) -> None:
        self.api, self.c = api, KubeClient.from_kubeconfig(api.kubeconfig)
        for i in range(1, nodes + 1):
            register_node(self.c, f"node{i}", f"10.250.0.1{i}", {})
        self.max_pods = 0

    def kubectl(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([kubectl_bin(), "--kubeconfig", str(self.api.kubeconfig), "-n", NS, *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        if ok:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc

    def pods(self, app: str) -> list[Obj]:
        return [p for p in self.c.list(CORE, "pods", NS) if p["metadata"]["labels"].get("app") == app]

    def step(self, app: str, kubelet: bool = True) -> None:
        """One controller pass, then the stand-in kubelet: every bound Pod Running and Ready."""
        workloads.sync(self.c)
        for p in self.pods(app):
            if kubelet and p["spec"].get("nodeName") and p.get("status", {}).get("phase") != "Running":
                self.c.patch_status(CORE, "pods", NS, p["metadata"]["name"], READY)
        self.max_pods = max(self.max_pods, len(self.pods(app)))

    def settle(self, app: str, rounds: int = 12) -> None:
        for _ in range(rounds):
            self.step(app)

    def get(self, plural: str, name: str) -> Obj:
        obj = self.c.get(APPS, plural, NS, name)
        assert obj is not None
        return obj

    def owned(self, plural: str, owner: Obj) -> list[Obj]:
        uid = owner["metadata"]["uid"]
        return [
            o for o in self.c.list(APPS, plural, NS)
            if any(r["uid"] == uid for r in o["metadata"].get("ownerReferences") or [])
        ]  # fmt: skip


def _workload(kind: str, app: str, **spec: Any) -> Obj:
    template = {"metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "k8shost:0.1.0"}]}}  # fmt: skip
    body = {"selector": {"matchLabels": {"app": app}}, "template": template, **spec}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": app, "namespace": NS}, "spec": body}


@pytest.fixture
def cluster(kube_api: KubeApiHandle) -> Cluster:
    return Cluster(kube_api)


def _revision(rs: Obj) -> str:
    return str(rs["metadata"]["annotations"][deployments.REVISION])


def test_a_deployment_runs_through_a_replicaset_and_rolls_out_as_kubectl_reads_it(cluster: Cluster) -> None:
    cluster.c.create(APPS, "deployments", NS, _workload("Deployment", "web", replicas=4))
    cluster.settle("web")
    d = cluster.get("deployments", "web")
    [rs] = cluster.owned("replicasets", d)
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}" and _revision(rs) == "1"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    assert all(p["metadata"]["name"].startswith(f"web-{h}-") for p in cluster.pods("web"))
    assert d["metadata"]["annotations"][deployments.REVISION] == "1"
    status = d["status"]
    counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "observedGeneration")
    assert [status[k] for k in counts] == [4, 4, 4, 4, d["metadata"]["generation"]]
    conds = {c["type"]: c for c in status["conditions"]}
    assert (conds["Available"]["status"], conds["Available"]["reason"]) == (
        "True",
        "MinimumReplicasAvailable",
    )
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert cluster.kubectl("rollout", "status", "deploy/web", "--timeout=5s").stdout == (
        'deployment "web" successfully rolled out\n'
    )
    assert cluster.kubectl("get", "deploy", "web", "--no-headers").stdout.split()[1:4] == ["4/4", "4", "4"]
    assert cluster.kubectl("get", "rs", "--no-headers").stdout.split()[:4] == [f"web-{h}", "4", "4", "4"]

    described = cluster.kubectl("describe", "deployment", "web").stdout
    assert "ScalingReplicaSet  " in described and f"Scaled up replica set web-{h} from 0 to 4" in described
    events = cluster.kubectl("get", "events", "--field-selector", f"involvedObject.name=web-{h}").stdout
    assert "SuccessfulCreate" in events and f"Created pod: web-{h}-" in events, events

    cluster.kubectl("rollout", "restart", "deploy/web")
    cluster.step("web", kubelet=False)  # the new ReplicaSet is created, nothing is Ready yet
    waiting = cluster.kubectl("rollout", "status", "deploy/web", "--watch=false").stdout
    assert waiting.startswith('Waiting for deployment "web" rollout to finish: '), waiting
    cluster.max_pods = 0
    cluster.settle("web", 20)
    assert cluster.max_pods <= 4 + 1  # maxSurge 25% of 4
    d = cluster.get("deployments", "web")
    rss = {_revision(r): r for r in cluster.owned("replicasets", d)}
    assert (
        sorted(rss) == ["1", "2"] and rss["1"]["spec"]["replicas"] == 0 and rss["2"]["spec"]["replicas"] == 4
    )
    assert d["status"]["updatedReplicas"] == 4 and d["status"]["replicas"] == 4
    history = cluster.kubectl("rollout", "history", "deploy/web").stdout.split("\n")
    assert [line.split()[0] for line in history[2:] if line.strip()] == ["1", "2"], history
    cluster.kubectl("rollout", "status", "deploy/web", "--timeout=5s")

    cluster.kubectl("rollout", "undo", "deploy/web")
    cluster.settle("web", 20)
    d = cluster.get("deployments", "web")
    rss = {_revision(r): r for r in cluster.owned("replicasets", d)}
    assert sorted(rss) == ["2", "3"] and rss["3"]["metadata"]["name"] == f"web-{h}", rss.keys()
    assert rss["3"]["spec"]["replicas"] == 4 and rss["2"]["spec"]["replicas"] == 0
    assert "kubectl.kubernetes.io/restartedAt" not in (
        d["spec"]["template"]["metadata"].get("annotations") or {}
    )


def test_scale_up_and_down_through_the_scale_subresource(cluster: Cluster) -> None:
    cluster.c.create(APPS, "deployments", NS, _workload("Deployment", "web", replicas=1))
    cluster.settle("web", 4)
    cluster.kubectl("scale", "deploy/web", "--replicas=3")
    cluster.settle("web", 6)
    assert len(cluster.pods("web")) == 3
    assert cluster.kubectl("get", "deploy", "web", "--no-headers").stdout.split()[1] == "3/3"
    cluster.kubectl("scale", "deploy/web", "--replicas=1")
    cluster.settle("web", 4)
    assert len(cluster.pods("web")) == 1 and cluster.get("deployments", "web")["status"]["replicas"] == 1


def test_recreate_removes_the_old_pods_before_the_new_replicaset_grows(cluster: Cluster) -> None:
    cluster.c.create(
        APPS, "deployments", NS, _workload("Deployment", "web", replicas=2, strategy={"type": "Recreate"})
    )
    cluster.settle("web", 4)
    cluster.kubectl("rollout", "restart", "deploy/web")
    cluster.max_pods = 0
    seen: list[tuple[int, int]] = []
    for _ in range(8):
        cluster.step("web")
        d = cluster.get("deployments", "web")
        by_rev = {_revision(r): r["spec"]["replicas"] for r in cluster.owned("replicasets", d)}
        seen.append((by_rev.get("1", 0), by_rev.get("2", 0)))
    assert cluster.max_pods <= 2 and seen[-1] == (0, 2)
    assert all(not (old and new) for old, new in seen), seen


def test_old_replicasets_beyond_the_history_limit_are_deleted(cluster: Cluster) -> None:
    cluster.c.create(
        APPS, "deployments", NS, _workload("Deployment", "web", replicas=1, revisionHistoryLimit=1)
    )
    cluster.settle("web", 4)
    for _ in range(3):
        time.sleep(
            1.05
        )  # kubectl refuses a second restart within the same second (its annotation's resolution)
        cluster.kubectl("rollout", "restart", "deploy/web")
        cluster.settle("web", 6)
    revisions = sorted(_revision(r) for r in cluster.owned("replicasets", cluster.get("deployments", "web")))
    assert revisions == ["3", "4"]


def test_a_rollout_without_progress_past_its_deadline_is_reported_by_rollout_status(cluster: Cluster) -> None:
    cluster.c.create(
        APPS, "deployments", NS, _workload("Deployment", "web", replicas=1, progressDeadlineSeconds=5)
    )
    for _ in range(4):  # its ReplicaSet created and scaled up, its Pod created, never Ready
        cluster.step("web", kubelet=False)
    d = cluster.get("deployments", "web")
    assert d["status"]["unavailableReplicas"] == 1
    plan = Plan()
    later = "2999-01-01T00:00:00Z"
    deployments.reconcile(d, cluster.owned("replicasets", d), plan, at=later)
    [(_, _, _, status)] = plan.statuses
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ProgressDeadlineExceeded")
    cluster.c.patch_status(APPS, "deployments", NS, "web", status)
    failed = cluster.kubectl("rollout", "status", "deploy/web", "--timeout=5s", ok=False)
    assert failed.returncode == 1 and 'deployment "web" exceeded its progress deadline' in failed.stderr


def test_a_daemonset_rolls_one_node_at_a_time_and_keeps_controllerrevisions(cluster: Cluster) -> None:
    cluster.c.create(APPS, "daemonsets", NS, _workload("DaemonSet", "agent"))
    cluster.settle("agent", 3)
    ds = cluster.get("daemonsets", "agent")
    st = ds["status"]
    assert (st["desiredNumberScheduled"], st["currentNumberScheduled"], st["numberReady"],
            st["updatedNumberScheduled"], st["numberAvailable"]) == (3, 3, 3, 3, 3)  # fmt: skip
    assert sorted(p["spec"]["nodeName"] for p in cluster.pods("agent")) == ["node1", "node2", "node3"]
    assert cluster.kubectl("rollout", "status", "ds/agent", "--timeout=5s").stdout == (
        'daemon set "agent" successfully rolled out\n'
    )
    cluster.kubectl("rollout", "restart", "ds/agent")
    for _ in range(3):  # old Pod deleted, the new one created, then counted
        cluster.step("agent", kubelet=False)
    assert len(cluster.pods("agent")) == 3  # one Node at a time (maxUnavailable 1): the new Pod not Ready yet
    hashes = [p["metadata"]["labels"]["controller-revision-hash"] for p in cluster.pods("agent")]
    assert (
        len(set(hashes)) == 2 and cluster.get("daemonsets", "agent")["status"]["updatedNumberScheduled"] == 1
    )
    waiting = cluster.kubectl("rollout", "status", "ds/agent", "--watch=false").stdout
    assert waiting.startswith('Waiting for daemon set "agent" rollout to finish: 1 out of 3 new pods'), (
        waiting
    )
    cluster.settle("agent", 10)
    cluster.kubectl("rollout", "status", "ds/agent", "--timeout=5s")
    history = cluster.kubectl("rollout", "history", "ds/agent").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"], history
    [first] = [r for r in cluster.owned("controllerrevisions", ds) if r["revision"] == 1]
    row = cluster.kubectl("get", "controllerrevisions", first["metadata"]["name"], "--no-headers").stdout
    assert row.split()[:3] == [first["metadata"]["name"], "daemonset.apps/agent", "1"], row
    cluster.kubectl("rollout", "undo", "ds/agent")
    cluster.settle("agent", 10)
    ds = cluster.get("daemonsets", "agent")
    assert cluster.get("controllerrevisions", first["metadata"]["name"])["revision"] == 3
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in cluster.pods("agent")} == {
        first["metadata"]["labels"]["controller-revision-hash"]
    }


def test_a_daemonset_with_max_surge_starts_the_new_pod_beside_the_old_one(cluster: Cluster) -> None:
    """maxSurge 1, maxUnavailable 0 (Kubernetes 1.22+): on one Node at a time the new Pod runs beside
    the old one, which is deleted only once the new one is Ready: every Node keeps a Ready Pod."""
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    cluster.c.create(APPS, "daemonsets", NS, _workload("DaemonSet", "surge", updateStrategy=strategy))
    cluster.settle("surge", 3)
    cluster.kubectl("rollout", "restart", "ds/surge")
    for _ in range(3):  # the new Pod created, never Ready: nothing else moves
        cluster.step("surge", kubelet=False)
    pods = cluster.pods("surge")
    assert len(pods) == 4 and len({p["spec"]["nodeName"] for p in pods}) == 3, pods
    ready = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    assert len(ready) == 3 and len({p["spec"]["nodeName"] for p in ready}) == 3  # no old one deleted yet
    cluster.max_pods = 0
    cluster.settle("surge", 12)
    ds = cluster.get("daemonsets", "surge")
    hashes = {p["metadata"]["labels"]["controller-revision-hash"] for p in cluster.pods("surge")}
    assert len(cluster.pods("surge")) == 3 and len(hashes) == 1, cluster.pods("surge")
    assert cluster.max_pods == 4  # one Node surging at a time
    assert ds["status"]["updatedNumberScheduled"] == ds["status"]["numberAvailable"] == 3
    cluster.kubectl("rollout", "status", "ds/surge", "--timeout=5s")


def test_a_statefulset_updates_from_the_highest_ordinal_and_reports_its_revisions(cluster: Cluster) -> None:
    cluster.c.create(APPS, "statefulsets", NS, _workload("StatefulSet", "db", replicas=3, serviceName="db"))
    cluster.settle("db", 8)
    sts = cluster.get("statefulsets", "db")
    st = sts["status"]
    assert (st["replicas"], st["readyReplicas"], st["currentReplicas"], st["updatedReplicas"]) == (3, 3, 3, 3)
    assert st["currentRevision"] == st["updateRevision"] and st["observedGeneration"] == 1
    assert cluster.kubectl("get", "sts", "db", "--no-headers").stdout.split()[1] == "3/3"
    first = st["currentRevision"]
    cluster.kubectl("rollout", "restart", "sts/db")
    cluster.step("db", kubelet=False)
    names = sorted(p["metadata"]["name"] for p in cluster.pods("db"))
    assert names == ["db-0", "db-1"]  # db-2 replaced first
    st = cluster.get("statefulsets", "db")["status"]
    assert st["currentRevision"] == first and st["updateRevision"] != first
    waiting = cluster.kubectl("rollout", "status", "sts/db", "--watch=false").stdout
    # kubectl reads the apiserver's default rollingUpdate.partition (0) as a partitioned roll out
    assert waiting == "Waiting for partitioned roll out to finish: 0 out of 3 new pods have been updated...\n"
    cluster.settle("db", 14)
    st = cluster.get("statefulsets", "db")["status"]
    assert st["currentRevision"] == st["updateRevision"] != first and st["updatedReplicas"] == 3
    done = cluster.kubectl("rollout", "status", "sts/db", "--timeout=5s").stdout
    assert done == "partitioned roll out complete: 3 new pods have been updated...\n"
    cluster.kubectl("rollout", "undo", "sts/db")
    cluster.settle("db", 14)
    assert cluster.get("statefulsets", "db")["status"]["currentRevision"] == first
    cluster.kubectl("scale", "sts/db", "--replicas=1")
    cluster.settle("db", 6)
    assert [p["metadata"]["name"] for p in cluster.pods("db")] == ["db-0"]


def test_deleting_a_deployment_removes_its_replicasets_and_pods(cluster: Cluster) -> None:
    cluster.c.create(APPS, "deployments", NS, _workload("Deployment", "web", replicas=2))
    cluster.settle("web", 4)
    assert len(cluster.pods("web")) == 2
    cluster.kubectl("delete", "deploy/web")
    cluster.settle("web", 3)
    assert cluster.pods("web") == [] and cluster.c.list(APPS, "replicasets", NS) == []


def test_an_unchanged_pass_writes_nothing(cluster: Cluster) -> None:
    cluster.c.create(APPS, "deployments", NS, _workload("Deployment", "web", replicas=2))
    cluster.settle("web", 6)
    d = cluster.get("deployments", "web")
    plan = Plan()
    deployments.reconcile(copy.deepcopy(d), cluster.owned("replicasets", d), plan)
    assert plan == Plan()


def test_a_pod_the_api_refuses_does_not_stop_the_pass(cluster: Cluster) -> None:
    """Admission refusing a Pod (403, as PodSecurity does) is logged; the other workloads go on and
    the Pod is created on a later pass."""
    cluster.api.set_fault(verb="create", resource="pods", code=403, times=1)
    cluster.c.create(APPS, "deployments", NS, _workload("Deployment", "web", replicas=1))
    cluster.c.create(APPS, "daemonsets", NS, _workload("DaemonSet", "agent"))
    cluster.step("web")
    assert len(cluster.pods("agent")) == 3
    cluster.settle("web", 3)
    assert len(cluster.pods("web")) == 1
    failed = cluster.kubectl("get", "events", "--field-selector", "reason=FailedCreate", "-o", "json").stdout
    [event] = json.loads(failed)["items"]
    assert event["message"] == "Error creating: injected fault" and event["source"]["component"] in (
        "replicaset-controller", "daemonset-controller")  # fmt: skip


def test_a_daemonsets_pods_bound_at_creation_get_the_schedulers_scheduled_event(cluster: Cluster) -> None:
    cluster.c.create(APPS, "daemonsets", NS, _workload("DaemonSet", "agent"))
    cluster.settle("agent", 2)
    events = cluster.kubectl("get", "events", "--field-selector", "reason=Scheduled").stdout
    for p in cluster.pods("agent"):
        m = p["metadata"]
        assert f"Successfully assigned {NS}/{m['name']} to {p['spec']['nodeName']}" in events, events
