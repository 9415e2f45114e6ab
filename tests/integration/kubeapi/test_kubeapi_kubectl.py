"""Faithfulness check: the real kubectl (v1.32) against the API double, with only what kubectl has:
the kubeconfig (server URL, CA, bearer token)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi_fixture import KubeApiHandle

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  labels: {app: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports:
  - name: http
    port: 80
    targetPort: 8080
"""


def kubectl_bin() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl (v1.32) is not installed: these tests drive the real client")
    return path


def kubectl(api: KubeApiHandle, *args: str, stdin: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(
        [kubectl_bin(), "--kubeconfig", str(api.kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if check and proc.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout + (proc.stderr if not check else "")


def kubectl_popen(api: KubeApiHandle, *args: str) -> subprocess.Popen[str]:
    argv = [kubectl_bin(), "--kubeconfig", str(api.kubeconfig), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kubectl_json(api: KubeApiHandle, *args: str) -> Any:
    return json.loads(kubectl(api, *args, "-o", "json"))


def apply_file(api: KubeApiHandle, tmp_path: Path, text: str, *extra: str) -> str:
    f = tmp_path / "obj.yaml"
    f.write_text(text)
    return kubectl(api, "apply", "-f", str(f), *extra)


def test_get_namespaces_table_and_json(kube_api: KubeApiHandle) -> None:
    out = kubectl(kube_api, "get", "ns")
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert "kube-system" in out and "Active" in out
    names = [n["metadata"]["name"] for n in kubectl_json(kube_api, "get", "namespaces")["items"]]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]


def test_create_f_then_get_all_namespaces_and_labels(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: kube-system, labels: {tier: db}}\n"
        "data: {k: v}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2, labels: {tier: web}}\n"
    )
    assert "configmap/c1 created" in kubectl(kube_api, "create", "-f", str(tmp_path / "cm.yaml"))
    out = kubectl(kube_api, "get", "cm", "-A", "-l", "tier in (db)")
    assert "c1" in out and "kube-system" in out and "c2" not in out
    assert kubectl(kube_api, "get", "cm", "-l", "tier=web", "-o", "name").strip() == "configmap/c2"
    assert "AlreadyExists" in kubectl(kube_api, "create", "-f", str(tmp_path / "cm.yaml"), check=False)


def test_apply_twice_changes_field_with_strategic_merge(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    assert "service/web created" in apply_file(kube_api, tmp_path, SERVICE)
    first = kubectl_json(kube_api, "get", "svc", "web")
    changed = SERVICE.replace("targetPort: 8080", "targetPort: 9090") + "  - name: metrics\n    port: 9100\n"
    assert "service/web configured" in apply_file(kube_api, tmp_path, changed)
    svc = kubectl_json(kube_api, "get", "svc", "web")
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert ports["http"]["targetPort"] == 9090 and ports["metrics"]["targetPort"] == 9100
    assert ports["http"]["nodePort"] == first["spec"]["ports"][0]["nodePort"]  # merged by port, kept
    assert svc["spec"]["clusterIP"] == first["spec"]["clusterIP"]
    patch = [r for r in kube_api.requests if r.verb == "patch" and r.resource == "services"]
    assert patch and patch[-1].status == 200
    out = kubectl(kube_api, "get", "svc", "web")
    assert out.splitlines()[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert "<pending>" in out


def test_server_side_apply_and_conflict(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    assert "serverside-applied" in apply_file(kube_api, tmp_path, SERVICE, "--server-side")
    other = SERVICE.replace("targetPort: 8080", "targetPort: 7070")
    f = tmp_path / "other.yaml"
    f.write_text(other)
    ssa = ("apply", "--server-side", "--field-manager=other")
    dry = kubectl(kube_api, *ssa, "--dry-run=server", "-f", str(f), check=False)
    assert "conflict" in dry
    res = kubectl(kube_api, "apply", "--server-side", "--field-manager=other", "-f", str(f), check=False)
    assert 'conflict with "kubectl"' in res and ".spec.ports" in res
    kubectl(kube_api, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", str(f))
    assert kubectl_json(kube_api, "get", "svc", "web")["spec"]["ports"][0]["targetPort"] == 7070


def test_patch_merge_strategic_json(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    apply_file(kube_api, tmp_path, SERVICE + "  - name: metrics\n    port: 9100\n")
    kubectl(kube_api, "patch", "svc", "web", "--type=merge", "-p", '{"metadata":{"labels":{"x":"1"}}}')
    kubectl(kube_api, "patch", "svc", "web", "-p", '{"spec":{"ports":[{"port":9100,"$patch":"delete"}]}}')
    kubectl(kube_api, "patch", "svc", "web", "--type=json",
            "-p", '[{"op":"replace","path":"/spec/sessionAffinity","value":"ClientIP"}]')  # fmt: skip
    svc = kubectl_json(kube_api, "get", "svc", "web")
    assert svc["metadata"]["labels"] == {"app": "web", "x": "1"}
    assert [p["port"] for p in svc["spec"]["ports"]] == [80]
    assert svc["spec"]["sessionAffinity"] == "ClientIP"
    failing_test_op = '[{"op":"test","path":"/x","value":1}]'
    bad = kubectl(kube_api, "patch", "svc", "web", "--type=json", "-p", failing_test_op, check=False)
    assert "The request is invalid" in bad and "not found" in bad


def test_delete_with_finalizer_waits_for_it(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    apply_file(
        kube_api,
        tmp_path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fin, finalizers: [example.com/hold]}\n",
    )
    assert 'configmap "fin" deleted' in kubectl(kube_api, "delete", "cm", "fin", "--wait=false")
    held = kubectl_json(kube_api, "get", "cm", "fin")
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["deletionGracePeriodSeconds"] == 0
    waiter = kubectl_popen(kube_api, "wait", "--for=delete", "cm/fin", "--timeout=20s")
    time.sleep(0.5)
    assert waiter.poll() is None  # still held by the finalizer
    kubectl(
        kube_api, "patch", "cm", "fin", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
    )
    _, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert "NotFound" in kubectl(kube_api, "get", "cm", "fin", check=False)


def test_get_watch_sees_changes(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    apply_file(kube_api, tmp_path, SERVICE)
    proc = kubectl_popen(kube_api, "get", "svc", "web", "-w", "--request-timeout=8s")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while not any("web" in ln for ln in lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    kubectl(kube_api, "patch", "svc", "web", "--subresource=status", "--type=merge",
            "-p", '{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}}')  # fmt: skip
    while not any("192.0.2.7" in ln for ln in lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.terminate()
    proc.wait(timeout=10)
    assert any("192.0.2.7" in ln for ln in lines), lines
    assert any(r.verb == "watch" and r.resource == "services" for r in kube_api.requests)


def test_wait_for_jsonpath(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    apply_file(kube_api, tmp_path, SERVICE)
    jsonpath = "--for=jsonpath={.status.loadBalancer.ingress[0].ip}=192.0.2.9"
    waiter = kubectl_popen(kube_api, "wait", "svc/web", "--timeout=20s", jsonpath)
    time.sleep(0.5)
    kubectl(kube_api, "patch", "svc", "web", "--subresource=status", "--type=merge",
            "-p", '{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.9"}]}}}')  # fmt: skip
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0 and "condition met" in out, err


def test_dry_run_server_stores_nothing(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    out = apply_file(kube_api, tmp_path, SERVICE, "--dry-run=server")
    assert "(server dry run)" in out
    assert kube_api.get("services", "default", "web") is None
    assert any("dryRun=All" in r.query for r in kube_api.requests)


def test_delete_namespace_removes_its_objects(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    apply_file(kube_api, tmp_path, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n")
    apply_file(kube_api, tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team}\n")
    assert 'namespace "team" deleted' in kubectl(kube_api, "delete", "ns", "team")
    assert kube_api.objects("configmaps", "team") == []
    assert "NotFound" in kubectl(kube_api, "get", "ns", "team", check=False)
    assert "Forbidden" in kubectl(kube_api, "delete", "ns", "default", check=False)


def test_generators_send_protobuf_bodies(kube_api: KubeApiHandle) -> None:
    kubectl(kube_api, "create", "namespace", "gen")
    kubectl(kube_api, "create", "configmap", "c", "-n", "gen", "--from-literal=a=b")
    kubectl(kube_api, "create", "secret", "generic", "s", "-n", "gen", "--from-literal=p=q")
    kubectl(kube_api, "create", "serviceaccount", "bot", "-n", "gen")
    cm, secret = kube_api.get("configmaps", "gen", "c"), kube_api.get("secrets", "gen", "s")
    assert cm is not None and cm["data"] == {"a": "b"}
    assert secret is not None and secret["data"] == {"p": "cQ=="} and secret["type"] == "Opaque"
    assert kube_api.get("serviceaccounts", "gen", "bot") is not None
    assert kube_api.get("namespaces", "", "gen") is not None
    kubectl(kube_api, "create", "service", "clusterip", "x", "--tcp=80:80")  # every built-in kind
    svc = kube_api.get("services", "default", "x")
    assert svc is not None and svc["spec"]["ports"][0]["targetPort"] == 80


def test_strict_field_validation_refuses_a_typo(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    typo = SERVICE.replace("spec:", "spce:").replace("  labels: {app: web}", "  labelz: {app: web}")
    out = kubectl(kube_api, "apply", "-f", "-", stdin=typo, check=False)
    assert "strict decoding error:" in out
    assert 'unknown field "metadata.labelz"' in out and 'unknown field "spce"' in out
    assert kube_api.get("services", "default", "web") is None
    # kubectl patch sends no fieldValidation: the default (Warn) accepts, as on the real server
    patched = kubectl(kube_api, "patch", "svc", "kubernetes", "--type=merge", "-p", '{"sepc":{}}')
    assert "patched" in patched
