"""An admin's everyday kubectl against `boot --nodes 3`, as on k3s: a table of commands run in
order, each failing the test on a non-zero exit or an output that does not match its pattern.

COMMANDS is a plain list of Step(argv, expect[, stdin, retry]) to extend, each row its own test case
(run in order on the package's shared boot, conftest.py): `expect` is a regular
expression searched (multiline) in stdout; `retry` is how many seconds a step may be repeated until it
passes (metrics need two scrapes, a LoadBalancer its address). Workloads of the table: a Deployment
`web` (HTTP on 8080, readiness probe), a DaemonSet `tick` and a StatefulSet `db` in `default` (applied
as YAML), a Deployment `hello` made by `kubectl create deployment` (protobuf), plus the overlay's own
(prismnet-agent, ovn-central). The table's workloads are deleted after its last row."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from nodeenv.image.build import image_name
from tests.integration.kubelet.boot_session import Booted

IMAGE = image_name()
WORKLOADS = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: {IMAGE}
          command: [python3, -m, http.server, "8080"]
          ports: [{{containerPort: 8080}}]
          readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: tick, namespace: default}}
spec:
  selector: {{matchLabels: {{app: tick}}}}
  template:
    metadata: {{labels: {{app: tick}}}}
    spec:
      containers: [{{name: tick, image: {IMAGE}, command: [sleep, infinity]}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: default}}
spec:
  replicas: 2
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      containers: [{{name: db, image: {IMAGE}, command: [sleep, infinity]}}]
"""


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    expect: str = ""
    stdin: str | None = None
    retry: float = 0


def rollout(kind: str, name: str, done: str, ns: str = "default") -> list[Step]:
    """`rollout status` to its end, restart, status again, history 1..2, undo, status, history 2..3."""
    status = Step(("-n", ns, "rollout", "status", f"{kind}/{name}", "--timeout=420s"), done)
    return [
        status,
        Step(("-n", ns, "rollout", "restart", f"{kind}/{name}"), rf"{name} restarted"),
        status,
        Step(
            ("-n", ns, "rollout", "history", f"{kind}/{name}"),
            r"^REVISION\s+CHANGE-CAUSE\n1\s+<none>\n2\s+<none>",
        ),
        Step(("-n", ns, "rollout", "undo", f"{kind}/{name}"), rf"{name} rolled back"),
        status,
        Step(
            ("-n", ns, "rollout", "history", f"{kind}/{name}"),
            r"^REVISION\s+CHANGE-CAUSE\n2\s+<none>\n3\s+<none>",
        ),
    ]


COMMANDS: list[Step] = [
    Step(
        ("apply", "-f", "-"),
        r"^deployment.apps/web created\ndaemonset.apps/tick created\nstatefulset.apps/db created",
        stdin=WORKLOADS,
    ),
    *rollout("deployment", "web", r'^deployment "web" successfully rolled out$'),
    Step(
        ("create", "deployment", "hello", f"--image={IMAGE}", "--replicas=2", "--", "sleep", "infinity"),
        r"^deployment.apps/hello created$",
    ),
    Step(
        ("rollout", "status", "deployment/hello", "--timeout=420s"),
        r'^deployment "hello" successfully rolled out$',
    ),
    Step(("scale", "deployment/web", "--replicas=3"), r"^deployment.apps/web scaled$"),
    Step(("rollout", "status", "deployment/web", "--timeout=420s"), r"successfully rolled out$"),
    Step(("get", "deployment", "web", "--no-headers"), r"^web\s+3/3\s+3\s+3\s"),
    Step(("get", "rs", "-l", "app=web", "--no-headers"), r"^web-\w+\s+3\s+3\s+3\s"),
    Step(
        (
            "expose",
            "deployment/web",
            "--name=web-lb",
            "--type=LoadBalancer",
            "--port=80",
            "--target-port=8080",
        ),
        r"^service/web-lb exposed$",
    ),
    Step(
        ("get", "service", "web-lb", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"),
        r"^\d+\.\d+\.\d+\.\d+$",
        retry=90,
    ),
    *rollout("daemonset", "tick", r'^daemon set "tick" successfully rolled out$'),
    *rollout("statefulset", "db", r"^partitioned roll out complete: 2 new pods have been updated\.\.\.$"),
    Step(("scale", "statefulset/db", "--replicas=1"), r"^statefulset.apps/db scaled$"),
    Step(("get", "statefulset", "db", "--no-headers"), r"^db\s+1/1\s", retry=60),
    Step(
        ("-n", "kube-system", "rollout", "status", "daemonset/prismnet-agent", "--timeout=60s"),
        r'^daemon set "prismnet-agent" successfully rolled out$',
    ),
    Step(
        ("-n", "kube-system", "rollout", "status", "statefulset/ovn-central", "--timeout=60s"),
        r"^partitioned roll out complete: 3 new pods have been updated\.\.\.$",
    ),
    Step(("-n", "kube-system", "rollout", "history", "daemonset/prismnet-agent"), r"^1\s+<none>$"),
    Step(("get", "all", "-n", "kube-system"), r"^statefulset.apps/ovn-central\s+3/3\s"),
    Step(("get", "all", "-n", "kube-system"), r"^daemonset.apps/prismnet-agent\s+3\s+3\s+3\s+3\s+3\s"),
    Step(("get", "all", "-n", "kube-system"), r"^deployment.apps/fiberlb-controller\s+2/2\s+2\s+2\s"),
    Step(("top", "nodes"), r"^node1\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*$", retry=60),
    Step(("top", "pods", "-A"), r"^kube-system\s+ovn-central-0\s+\d+m\s+\d+Mi\s*$", retry=60),
    Step(("top", "pods", "-l", "app=web"), r"^web-\w+-\w+\s+\d+m\s+\d+Mi\s*$", retry=60),
    Step(("get", "events", "-A"), r""),
    Step(
        ("describe", "deployment", "web"),
        r"ScalingReplicaSet\s+\S+\s+deployment-controller\s+Scaled (up|down) replica set web-",
    ),
    Step(
        ("get", "events", "--field-selector", "reason=SuccessfulCreate"),
        r"daemonset/tick\s+Created pod: tick-",
    ),
    # through the nodes' kubelet API (port-forward, cp and the refusals: test_kubectl_reach.py)
    Step(("logs", "statefulset/db", "--tail", "5"), r""),
    Step(("exec", "deployment/web", "--", "python3", "-c", "print('hi')"), r"^hi$"),
    Step(("exec", "-i", "statefulset/db", "--", "cat"), r"^piped$", stdin="piped\n"),
]


@pytest.fixture(autouse=True, scope="module")
def _cleanup(booted: Booted) -> Iterator[None]:
    """The table's workloads off the shared boot (the modules after this one run beside less)."""
    yield
    booted.kubectl("delete", "service/web-lb", "deployment/web", "deployment/hello", "daemonset/tick",
                   "statefulset/db", "--ignore-not-found", "--wait=false")  # fmt: skip


def run_step(booted: Booted, step: Step) -> str:
    deadline = time.monotonic() + step.retry
    while True:
        proc = booted.run(*step.argv, stdin=step.stdin)
        ok = proc.returncode == 0 and re.search(step.expect, proc.stdout, re.M) is not None
        if ok or time.monotonic() >= deadline:
            break
        time.sleep(2)
    assert proc.returncode == 0, f"kubectl {' '.join(step.argv)} exited {proc.returncode}: {proc.stderr}"
    assert ok, f"kubectl {' '.join(step.argv)}: no match for {step.expect!r} in:\n{proc.stdout}"
    return proc.stdout


@pytest.mark.timeout(900)  # a rollout may take minutes under load
@pytest.mark.parametrize(
    "step", COMMANDS, ids=[f"{i:02d} {' '.join(s.argv)}" for i, s in enumerate(COMMANDS)]
)
def test_an_admins_kubectl_command_answers_as_on_k3s(booted: Booted, step: Step) -> None:
    """One row of the table, in order (later rows use what earlier ones made)."""
    run_step(booted, step)
