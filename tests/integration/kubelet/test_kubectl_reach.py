"""kubectl logs, exec, attach, port-forward and cp on `boot --nodes 3`, through kubectl itself (and
the official client's `stream()`): the double's pods/log, pods/exec, pods/attach and
pods/portforward call the pod's node's kubelet API (the runner's, HTTPS on the node's address,
port 10250, the API double's client certificate checked). On the package's shared boot
(conftest.py), in a namespace of this module's, deleted at its end.

Pods of a namespace of their own: `web` (an init container, a ticking container `app`, an HTTP
server `srv` on 8080, in the pod network), `crash` (exits 1, restarted after kubelet's back-off:
its previous instance's log), `pending` (no node fits) and `waiting` (an image not in the store).
The refusals are kube-apiserver's and kubelet's answers."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.image.build import image_name
from tests.integration.kubelet.boot_session import Booted
from tests.integration.kubelet.conftest import wait_for
from tests.integration.kubelet.kubelet_api_commands import KUBELET_API_COMMANDS

NS = "reach"
TICKS = "echo started; i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done"


class Cluster:
    def __init__(self, run_dir: Path) -> None:
        self.kubeconfig = run_dir / "kubeapi" / "admin.kubeconfig"

    def run(
        self, *args: str, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def ok(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        proc = self.run(*args, stdin=stdin, timeout=timeout)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def pod(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.ok("-n", NS, "get", "pod", name, "-o", "json"))
        return out

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["kubectl", "--kubeconfig", str(self.kubeconfig), *args], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    for c in [*containers, *spec.get("initContainers", [])]:
        c.setdefault("image", image_name())
        c.setdefault("imagePullPolicy", "Never")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": containers, "terminationGracePeriodSeconds": 1, **spec}}  # fmt: skip


PODS = [
    _pod("web", [{"name": "app", "command": ["sh", "-c", TICKS]},
                 {"name": "srv", "command": ["python3", "-m", "http.server", "8080", "-d", "/etc"]}],
         initContainers=[{"name": "setup", "command": ["sh", "-c", "echo init-done"]}]),
    _pod("crash", [{"name": "app", "command": ["sh", "-c", "echo run at $(date +%s); exit 1"]}]),
    _pod("pending", [{"name": "app", "command": ["sleep", "infinity"]}], nodeSelector={"no-such": "node"}),
    _pod("waiting", [{"name": "app", "image": "registry.example/absent:1"}]),
]  # fmt: skip


@pytest.fixture(scope="module")
def cluster(booted: Booted) -> Iterator[Cluster]:
    c = Cluster(booted.run_dir)
    c.ok("create", "namespace", NS)
    try:
        c.ok("apply", "-f", "-", stdin="\n".join(json.dumps(p) for p in PODS))
        wait_for(lambda: _running(c, "web", 2), 120, "pod web Running", lambda: c.ok("-n", NS, "get", "pods"))
        yield c
    finally:
        c.ok("delete", "namespace", NS, "--wait=false")


def _running(c: Cluster, name: str, n: int) -> bool:
    statuses = c.pod(name).get("status", {}).get("containerStatuses") or []
    return sum(1 for s in statuses if "running" in s.get("state", {})) == n


def test_logs_tail_since_container_and_init_container(cluster: Cluster) -> None:
    wait_for(lambda: "tick 3" in cluster.ok("-n", NS, "logs", "web", "-c", "app"), 30, "4 ticks")
    assert cluster.ok("-n", NS, "logs", "web", "-c", "setup") == "init-done\n"
    tail = cluster.ok("-n", NS, "logs", "web", "-c", "app", "--tail", "2").splitlines()
    assert len(tail) == 2 and all(t.startswith("tick ") for t in tail), tail
    everything = cluster.ok("-n", NS, "logs", "web", "-c", "app")
    assert everything.startswith("started\ntick 0\n")
    recent = cluster.ok("-n", NS, "logs", "web", "-c", "app", "--since", "3s").splitlines()
    assert 1 <= len(recent) <= 5 and "started" not in recent, recent
    stamped = cluster.ok("-n", NS, "logs", "web", "-c", "app", "--tail", "1", "--timestamps")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\S* tick \d+\n$", stamped), stamped
    limited = cluster.ok("-n", NS, "logs", "web", "-c", "app", "--limit-bytes", "10")
    assert limited == "started\nti"


def test_logs_follow_streams_new_lines(cluster: Cluster) -> None:
    proc = cluster.popen("-n", NS, "logs", "-f", "web", "-c", "app", "--tail", "1")
    try:
        time.sleep(4)
    finally:
        proc.terminate()
    out = proc.communicate(timeout=10)[0].splitlines()
    numbers = [int(line.split()[1]) for line in out]
    assert len(numbers) >= 3 and numbers == list(range(numbers[0], numbers[0] + len(numbers))), out


def test_logs_previous_after_a_restart(cluster: Cluster) -> None:
    def restarted() -> bool:
        statuses = cluster.pod("crash").get("status", {}).get("containerStatuses") or [{}]
        return int(statuses[0].get("restartCount", 0)) >= 2

    wait_for(restarted, 90, "crash restarted twice", lambda: cluster.ok("-n", NS, "get", "pod", "crash"))
    previous = cluster.ok("-n", NS, "logs", "crash", "--previous")
    assert re.fullmatch(r"run at \d+\n", previous), previous
    proc = cluster.run("-n", NS, "logs", "web", "-c", "app", "--previous")
    assert proc.returncode == 1
    no_previous = 'previous terminated container "app" in pod "web" not found'
    assert proc.stderr.strip() == f"Error from server (BadRequest): {no_previous}"


def test_exec_exit_code_output_and_stdin(cluster: Cluster) -> None:
    proc = cluster.run(
        "-n", NS, "exec", "web", "-c", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 3"
    )
    assert (proc.returncode, proc.stdout) == (3, "out\n"), proc.stderr
    assert proc.stderr == "err\ncommand terminated with exit code 3\n"
    piped = cluster.ok(
        "-n", NS, "exec", "-i", "web", "-c", "app", "--", "tr", "a-z", "A-Z", stdin="hello\nworld\n"
    )
    assert piped == "HELLO\nWORLD\n"
    assert cluster.ok("-n", NS, "exec", "web", "-c", "srv", "--", "hostname") == "web\n"


def test_cp_both_ways(cluster: Cluster, tmp_path: Path) -> None:
    data = bytes(range(256)) * 400  # 100 KiB, every byte value
    (tmp_path / "up.bin").write_bytes(data)
    cluster.ok("-n", NS, "cp", str(tmp_path / "up.bin"), "web:/tmp/up.bin", "-c", "app")
    remote = cluster.ok("-n", NS, "exec", "web", "-c", "app", "--", "md5sum", "/tmp/up.bin").split()[0]
    assert remote == hashlib.md5(data).hexdigest()
    cluster.ok("-n", NS, "cp", "web:/etc/hostname", str(tmp_path / "hostname"), "-c", "app")
    assert (tmp_path / "hostname").read_text() == "web"  # as podman writes it: no newline


def test_attach_streams_the_container_output(cluster: Cluster) -> None:
    proc = cluster.popen("-n", NS, "attach", "web", "-c", "app")
    try:
        time.sleep(4)
    finally:
        proc.terminate()
    out = proc.communicate(timeout=10)[0]
    assert len(re.findall(r"^tick \d+$", out, re.M)) >= 2, out


def test_port_forward_carries_a_tcp_request(cluster: Cluster) -> None:
    proc = cluster.popen("-n", NS, "port-forward", "pod/web", ":8080")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "Forwarding from 127.0.0.1:NNNNN -> 8080"
        port = int(re.search(r"127\.0\.0\.1:(\d+) -> 8080", line).group(1))  # type: ignore[union-attr]
        for _ in range(2):  # two connections over the one forwarding session
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/hostname", timeout=10) as resp:
                assert (resp.status, resp.read()) == (200, b"web")
    finally:
        proc.terminate()
        proc.wait(10)


def test_official_client_stream_exec(cluster: Cluster) -> None:
    from kubernetes import client, config
    from kubernetes.stream import stream

    api = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    out = stream(api.connect_get_namespaced_pod_exec, "web", NS, container="app",
                 command=["sh", "-c", "echo from-client"], stderr=True, stdin=False, stdout=True,
                 tty=False)  # fmt: skip
    assert out == "from-client\n"
    resp = stream(api.connect_get_namespaced_pod_exec, "web", NS, container="app",
                  command=["sh", "-c", "exit 7"], stderr=True, stdin=False, stdout=True, tty=False,
                  _preload_content=False)  # fmt: skip
    resp.run_forever(timeout=20)
    assert resp.returncode == 7
    tty = stream(api.connect_get_namespaced_pod_exec, "web", NS, container="app",
                 command=["sh", "-c", "[ -t 0 ] && echo a-terminal"], stderr=True, stdin=True, stdout=True,
                 tty=True)  # fmt: skip
    assert tty == "a-terminal\r\n"


NO_HOST = "Error from server (BadRequest): pod pending does not have a host assigned"
WAITING = (
    'Error from server (BadRequest): container "app" in pod "waiting" is waiting to start: ErrImageNeverPull'
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("logs", "pending"), NO_HOST),
        (("exec", "pending", "--", "true"), NO_HOST),
        (("logs", "waiting"), WAITING),
        (
            ("exec", "waiting", "--", "true"),
            'error: unable to upgrade connection: container not found ("app")',
        ),
    ],
)
def test_refusals_are_kube_apiservers(cluster: Cluster, args: tuple[str, ...], message: str) -> None:
    if args[1] == "waiting":
        wait_for(lambda: _waiting_reason(cluster) == "ErrImageNeverPull", 60, "waiting's reason")
    proc = cluster.run("-n", NS, *args)
    assert proc.returncode == 1 and proc.stderr.strip() == message, proc.stderr


def test_unknown_container_is_400_from_the_server(cluster: Cluster) -> None:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    with pytest.raises(client.ApiException) as e:
        api.read_namespaced_pod_log("web", NS, container="nope")
    assert (e.value.status, json.loads(e.value.body)["message"]) == (
        400,
        "container nope is not valid for pod web",
    )
    with pytest.raises(client.ApiException) as e:  # two containers and an init container: which one?
        api.read_namespaced_pod_log("web", NS)
    assert json.loads(e.value.body)["message"] == (
        "a container name must be specified for pod web, choose one of: [app srv] or one of the init "
        "containers: [setup]"
    )


def _waiting_reason(cluster: Cluster) -> str:
    statuses = cluster.pod("waiting").get("status", {}).get("containerStatuses") or [{}]
    return str(statuses[0].get("state", {}).get("waiting", {}).get("reason", ""))


def test_admin_command_list_runs(cluster: Cluster, tmp_path: Path) -> None:
    """The rows handed to the admin command-list test, here against this module's pods."""
    for row in KUBELET_API_COMMANDS:
        args = [a.replace("{ns}", NS).replace("{tmp}", str(tmp_path)) for a in row]
        proc = cluster.run(*args, timeout=30)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
