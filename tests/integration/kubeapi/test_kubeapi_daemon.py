"""The double as its real callers start it: `python -m nodeenv.kubeapi` (a process, SIGTERM), and the
node-env component that `make node-up` runs (KUBECONFIG in node.env, used by kubectl)."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from nodeenv.daemons import is_alive
from nodeenv.kubeapi.auditlog import read_audit_log
from nodeenv.kubeapi_component import KubeApiComponent
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.node import Node, NodeSettings, read_env_file
from nodeenv.scenario import Scenario
from nodeenv.scenarios import kubeapi as kubeapi_scenario
from tests.integration.controllers.netpol.traffic import in_netns
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl_bin


def test_help_names_every_env_fallback() -> None:
    out = subprocess.run([sys.executable, "-m", "nodeenv.kubeapi", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for var in ("KUBEAPI_DIR", "KUBEAPI_PORT", "KUBEAPI_SERVICE_CIDR", "KUBEAPI_ENFORCE_RBAC"):
        assert var in out.stdout


def test_daemon_serves_kubectl_and_stops_on_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "ports.json"
    argv = [sys.executable, "-m", "nodeenv.kubeapi", "--dir", str(tmp_path / "api"), "--port", "0",
            "--port-file", str(port_file), "--user", "alice"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        info = json.loads(port_file.read_text())
        out = subprocess.run([kubectl_bin(), "--kubeconfig", info["kubeconfig"], "get", "ns", "-o", "name"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "namespace/kube-system" in out.stdout
        assert Path(info["users"]["alice"]).exists()
        ctx = ssl.create_default_context(cafile=str(tmp_path / "api" / "pki" / "ca.crt"))
        with pytest.raises(urllib.error.HTTPError) as anonymous:  # kube-apiserver: system:monitoring only
            urllib.request.urlopen(f"{info['url']}/metrics", context=ctx, timeout=10)
        assert anonymous.value.code == 401
        token = yaml.safe_load(Path(info["users"]["alice"]).read_text())["users"][0]["user"]["token"]
        req = urllib.request.Request(f"{info['url']}/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            metrics = r.read().decode()
        assert 'kubeapi_requests_total{code="200",resource="namespaces",verb="list"} 1.0' in metrics
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    lines = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    assert any("signal received" in r["msg"] for r in lines)


def test_node_component_writes_kubeconfig_to_node_env(short_tmp: Path) -> None:
    settings = NodeSettings(run_dir=short_tmp / f"ka-{time.monotonic_ns()}", bridge="br-unused")
    node = Node(settings, [KubeApiComponent()])
    node.up()
    try:
        env = read_env_file(node.env_file)
        assert env["KUBE_API_URL"].startswith("https://127.0.0.1:")
        assert f'server: "{env["KUBE_API_URL"]}"' in Path(env["KUBECONFIG"]).read_text()
        out = subprocess.run([kubectl_bin(), "--kubeconfig", env["KUBECONFIG"], "get", "svc", "kubernetes"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        assert out.returncode == 0 and "10.96.0.1" in out.stdout, out.stderr
        records = node.daemons.load()
        assert [r.name for r in records] == ["kubeapi"] and is_alive(records[0])
        scn = Scenario(node)
        try:
            kubeapi_scenario.run(scn)
        finally:
            assert scn.run_cleanups() == []
        assert all(r.ok for r in scn.results) and len(scn.results) == 4, scn.table()
    finally:
        node.down()
    assert not is_alive(records[0]) and not settings.run_dir.exists()


def _daemon(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[str], Path]:
    port_file = tmp_path / "ports.json"
    argv = [sys.executable, "-m", "nodeenv.kubeapi", "--dir", str(tmp_path / "api"), "--port", "0",
            "--port-file", str(port_file), *flags]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, port_file


def _namespaces(client: KubeClient) -> list[str]:
    return [o["metadata"]["name"] for o in client.list("/api/v1", "namespaces")]


def test_daemon_also_serves_inside_another_network_namespace(tmp_path: Path) -> None:
    """`--also-listen NETNS=HOST:PORT` (a cluster's underlay, for its nodes): the socket lives in that
    namespace, its kubeconfig names that URL and the certificate that host; loopback still serves."""
    netns, host = f"k8sx-api-{os.getpid()}", "10.251.7.1"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        subprocess.run(["ip", "-n", netns, "addr", "add", f"{host}/32", "dev", "lo"], check=True)
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
        proc, port_file = _daemon(tmp_path, "--also-listen", f"{netns}={host}:6443")
        try:
            info = json.loads(port_file.read_text())
            (also,) = info["also"]
            assert also["netns"] == netns and also["url"] == f"https://{host}:6443"
            there = KubeClient.from_kubeconfig(Path(also["kubeconfig"]))
            assert "kube-system" in in_netns(netns, lambda: _namespaces(there))
            assert "kube-system" in _namespaces(KubeClient.from_kubeconfig(Path(info["kubeconfig"])))
        finally:
            proc.terminate()
            proc.communicate(timeout=20)
        assert proc.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", netns], check=False)


def test_daemon_refuses_a_namespace_that_does_not_exist(tmp_path: Path) -> None:
    proc, _ = _daemon(tmp_path, "--also-listen", "k8sx-nonexistent=10.251.7.1:6443")
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "network namespace k8sx-nonexistent does not exist" in err, err


def test_node_component_with_an_audit_log_records_who_did_what(short_tmp: Path) -> None:
    """`KubeApiComponent(audit_log=True)` (cluster mode's): every request in KUBE_AUDIT_LOG as an
    audit.k8s.io/v1 Event naming the user, the client's address and user agent, the object (a
    create's from its body), the code; a watch logged when its stream starts."""
    node = Node(NodeSettings(run_dir=short_tmp / f"kaudit-{time.monotonic_ns()}", bridge="br-unused"),
                [KubeApiComponent(audit_log=True)])  # fmt: skip
    node.up()
    try:
        env = read_env_file(node.env_file)
        kubectl = [kubectl_bin(), "--kubeconfig", env["KUBECONFIG"]]
        out = subprocess.run(
            [*kubectl, "create", "namespace", "audited"], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        watch = [*kubectl, "get", "namespaces", "--watch-only", "--request-timeout=1s"]
        subprocess.run(watch, capture_output=True, timeout=30)  # it ends at its request timeout
        events = read_audit_log(Path(env["KUBE_AUDIT_LOG"]))
    finally:
        node.down()
    (create,) = [e for e in events if e["verb"] == "create" and e["objectRef"]["resource"] == "namespaces"]
    assert create["objectRef"] == {"resource": "namespaces", "name": "audited", "apiVersion": "v1"}
    assert create["user"]["username"] == "kubernetes-admin" and create["sourceIPs"] == ["127.0.0.1"]
    assert str(create["userAgent"]).startswith("kubectl/") and create["responseStatus"]["code"] == 201
    assert create["requestReceivedTimestamp"] <= create["stageTimestamp"]
    (watch,) = [e for e in events if e["verb"] == "watch"]
    assert watch["stage"] == "ResponseStarted" and watch["objectRef"] == {
        "resource": "namespaces",
        "apiVersion": "v1",
    }
