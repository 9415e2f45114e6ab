"""What `kubectl apply -k daemonsets/overlays/k3s` would send: the overlay rendered once per session by
the kubectl on this machine, and small walkers over the rendered objects the checks share."""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DS = ROOT / "daemonsets"
OVERLAY = DS / "overlays" / "k3s"
K3S = DS / "k3s"
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")
SUITE_IMAGE = "registry.plasmacloud.io/k8shost"

Obj = dict[str, Any]


@functools.cache
def _render(path: Path) -> tuple[Obj, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl (v1.32) is not on PATH: these machines ship /usr/bin/kubectl; install it")
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.fail(f"kubectl kustomize {path.relative_to(ROOT)} failed:\n{out.stderr}")
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def objects(path: Path = OVERLAY) -> tuple[Obj, ...]:
    """Every object the kustomization at `path` renders (the k3s overlay by default)."""
    return _render(path)


def ident(obj: Obj) -> str:
    meta = obj["metadata"]
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']}/{ns}{meta['name']}"


def workloads() -> list[Obj]:
    return [o for o in objects() if o["kind"] in WORKLOAD_KINDS]


def pod_spec(workload: Obj) -> Obj:
    spec: Obj = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Obj, *, init: bool = True) -> list[Obj]:
    spec = pod_spec(workload)
    return [*(spec.get("initContainers") or [] if init else []), *spec["containers"]]


def suite_containers() -> Iterator[tuple[Obj, Obj]]:
    """(workload, container) for every container running the suite's image."""
    for w in workloads():
        for c in containers(w):
            if c["image"].split(":")[0] == SUITE_IMAGE:
                yield w, c


def find(kind: str, name: str) -> Obj:
    for o in objects():
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise AssertionError(f"the k3s overlay renders no {kind} {name}")


def container_env(workload: Obj, container: Obj) -> dict[str, str]:
    """The environment kubelet would give the container: literal values, ConfigMap keys (which must
    exist in the rendered ConfigMaps), placeholders for field and Secret references."""
    ns = workload["metadata"].get("namespace", "")
    maps = {o["metadata"]["name"]: o.get("data") or {} for o in objects()
            if o["kind"] == "ConfigMap" and o["metadata"].get("namespace", "") == ns}  # fmt: skip
    env: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        name = src["configMapRef"]["name"]
        assert name in maps, f"{ident(workload)}: envFrom names missing ConfigMap {ns}/{name}"
        env.update(maps[name])
    for e in container.get("env") or []:
        ref = e.get("valueFrom") or {}
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif "configMapKeyRef" in ref:
            key = ref["configMapKeyRef"]
            assert key["key"] in maps.get(key["name"], {}), f"{ident(workload)}: {e['name']} names {key}"
            env[e["name"]] = maps[key["name"]][key["key"]]
        elif "fieldRef" in ref:
            env[e["name"]] = {
                "status.hostIP": "192.0.2.10",
                "status.podIP": "10.244.0.10",
                "metadata.namespace": ns,
                "metadata.name": f"{workload['metadata']['name']}-pod-1",
            }.get(ref["fieldRef"]["fieldPath"], "node-1")
        else:
            env[e["name"]] = "from-secret"
    return env


def k3s_file(name: str) -> Obj:
    doc: Obj = yaml.safe_load((K3S / name).read_text())
    return doc
