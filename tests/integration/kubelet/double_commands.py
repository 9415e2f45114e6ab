"""The admin's everyday kubectl commands the API double answers as kube-apiserver does (built-in kinds
sent as protobuf, the objects they make, events, roles), for the admin command-list test to join.
Each entry is kubectl's argv after `kubectl --kubeconfig ...`; `{ns}` is the namespace to use.
tests/integration/kubeapi/test_kubeapi_protobuf_kubectl.py runs the create commands against the double.
"""

from __future__ import annotations

# (argv, what it shows) — in order: later commands use what earlier ones made
DOUBLE_COMMANDS: list[tuple[list[str], str]] = [
    (["create", "namespace", "{ns}"], "a namespace, and its default ServiceAccount"),
    (["-n", "{ns}", "get", "serviceaccount", "default"], "the default ServiceAccount"),
    (["-n", "{ns}", "create", "token", "default"], "a bound token (TokenRequest as protobuf)"),
    (
        [
            "-n",
            "{ns}",
            "create",
            "deployment",
            "web",
            "--image=registry.k8s.io/pause:3.10",
            "--replicas=2",
            "--port=80",
        ],
        "a Deployment sent as protobuf",
    ),
    (
        ["-n", "{ns}", "expose", "deployment", "web", "--port=80", "--target-port=80"],
        "a Service sent as protobuf",
    ),
    (["-n", "{ns}", "create", "service", "clusterip", "svc1", "--tcp=8080:80"], "a Service"),
    (
        ["-n", "{ns}", "run", "pod1", "--image=registry.k8s.io/pause:3.10", "--labels=app=pod1"],
        "a Pod without serviceAccountName",
    ),
    (["-n", "{ns}", "create", "job", "job1", "--image=registry.k8s.io/pause:3.10"], "a Job"),
    (
        [
            "-n",
            "{ns}",
            "create",
            "cronjob",
            "cj1",
            "--image=registry.k8s.io/pause:3.10",
            "--schedule=*/5 * * * *",
        ],
        "a CronJob",
    ),
    (["-n", "{ns}", "create", "role", "r1", "--verb=get,list", "--resource=pods"], "a Role"),
    (["-n", "{ns}", "create", "rolebinding", "rb1", "--role=r1", "--user=alice"], "a RoleBinding"),
    (["-n", "{ns}", "create", "configmap", "cm1", "--from-literal=k=v"], "a ConfigMap"),
    (["-n", "{ns}", "create", "secret", "generic", "s1", "--from-literal=k=v"], "a Secret"),
    (["-n", "{ns}", "create", "quota", "q1", "--hard=pods=10"], "a ResourceQuota"),
    (["-n", "{ns}", "scale", "deployment", "web", "--replicas=3"], "the scale subresource"),
    (
        ["-n", "{ns}", "set", "image", "deployment/web", "pause=registry.k8s.io/pause:3.9"],
        "a strategic merge patch",
    ),
    (["get", "rc,apiservices", "-A"], "ReplicationControllers and APIServices"),
    (["get", "nodes"], "ROLES from the k3s node-role labels"),
    (["get", "events", "-A"], "the scheduler's and kubelet's Events"),
]
