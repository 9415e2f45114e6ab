"""A container's environment as kubelet builds it (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables):
the Service variables of the master (KUBERNETES_SERVICE_HOST/PORT), then envFrom in order, then env in
order, each value's `$(VAR)` expanded against what came before; fieldRef, configMapKeyRef and
secretKeyRef resolved (Secrets decoded). A missing object or key that is not `optional` is a
ConfigError, which kubelet reports as CreateContainerConfigError with the same message."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
Lookup = Callable[[str, str, str], Obj | None]
"""(plural "configmaps" | "secrets", namespace, name) -> the object, or None."""
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class ConfigError(Exception):
    """kubelet's CreateContainerConfigError."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodContext:
    pod: Obj
    host_ip: str
    pod_ip: str
    api_host: str
    api_port: int


def expand(text: str, env: Mapping[str, str]) -> str:
    """`$(VAR)` -> its value when defined (else left as is), `$$` -> `$`, as kubelet's expansion."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _REF.sub(sub, text)


def _data(kind: str, obj: Obj) -> dict[str, str]:
    if kind == "secrets":
        out = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
        return {**out, **(obj.get("stringData") or {})}
    return dict(obj.get("data") or {})


def _label(kind: str) -> str:
    return "ConfigMap" if kind == "configmaps" else "Secret"


def key_ref(lookup: Lookup, kind: str, ns: str, ref: Obj) -> str | None:
    obj = lookup(kind, ns, ref.get("name", ""))
    optional = bool(ref.get("optional"))
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{_label(kind).lower()} "{ref.get("name")}" not found')
    data = _data(kind, obj)
    if ref["key"] not in data:
        if optional:
            return None
        raise ConfigError(f"couldn't find key {ref['key']} in {_label(kind)} {ns}/{ref.get('name')}")
    return data[ref["key"]]


def field_ref(ctx: PodContext, path: str) -> str:
    meta, spec = ctx.pod["metadata"], ctx.pod["spec"]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""), "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": ctx.host_ip, "status.hostIPs": ctx.host_ip,
        "status.podIP": ctx.pod_ip, "status.podIPs": ctx.pod_ip,
    }  # fmt: skip
    if path not in simple:
        raise ConfigError(f"unsupported fieldRef fieldPath {path!r}")
    return str(simple[path])


def _env_from(lookup: Lookup, ns: str, source: Obj) -> dict[str, str]:
    kind, ref = (
        ("configmaps", source["configMapRef"])
        if "configMapRef" in source
        else ("secrets", source["secretRef"])
    )
    obj = lookup(kind, ns, ref.get("name", ""))
    if obj is None:
        if ref.get("optional"):
            return {}
        raise ConfigError(f'{_label(kind).lower()} "{ref.get("name")}" not found')
    prefix = source.get("prefix", "")
    return {prefix + k: v for k, v in _data(kind, obj).items()}


def container_env(lookup: Lookup, ctx: PodContext, container: Obj) -> dict[str, str]:
    ns = ctx.pod["metadata"]["namespace"]
    port = str(ctx.api_port)  # the master Service's variables: always set, enableServiceLinks or not
    env: dict[str, str] = {"KUBERNETES_SERVICE_HOST": ctx.api_host, "KUBERNETES_SERVICE_PORT": port,
                           "KUBERNETES_SERVICE_PORT_HTTPS": port}  # fmt: skip
    for source in container.get("envFrom") or []:
        env |= _env_from(lookup, ns, source)
    for var in container.get("env") or []:
        value: str | None
        if "valueFrom" not in var:
            value = expand(var.get("value", ""), env)
        else:
            src = var["valueFrom"]
            if "fieldRef" in src:
                value = field_ref(ctx, src["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in src:
                value = key_ref(lookup, "configmaps", ns, src["configMapKeyRef"])
            elif "secretKeyRef" in src:
                value = key_ref(lookup, "secrets", ns, src["secretKeyRef"])
            else:
                raise ConfigError(f"env {var['name']}: unsupported valueFrom {sorted(src)}")
        if value is not None:
            env[var["name"]] = value
    return env
