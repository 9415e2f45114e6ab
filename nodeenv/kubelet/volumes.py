"""A Pod's volumes made on disk, as kubelet's volume plugins make them, and each container's mounts.

hostPath paths are the node's: under the node's root directory (`NodeRoot.host`), except the
devices, kernel trees and network state a node shares with the machine (SHARED_WITH_MACHINE), so the
tests never write the machine's /etc/cni or /var/lib/kubelet. The hostPath `type` is checked as
kubelet checks it. configMap and secret volumes are files, Secrets decoded, with `items`,
`defaultMode` and `optional`; emptyDir a directory of the pod; projected volumes combine
serviceAccountToken (a token from TokenRequest), configMap, secret and downwardAPI.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodeenv.kubelet.envvars import ConfigError, Lookup, PodContext, field_ref

Obj = dict[str, Any]
TokenSource = Callable[[str, str, int], str]
ClaimMounter = Callable[[PodContext, dict[str, Any]], Path]
"""(pod, persistentVolumeClaim volume) -> the claim's volume published for the pod (its path here)."""
"""(namespace, service account, expirationSeconds) -> a token the API accepts for that account."""
SHARED_WITH_MACHINE = (
    Path("/dev"),
    Path("/sys"),
    Path("/proc"),
    Path("/lib/modules"),
    Path("/run/netns"),
    Path("/run/xtables.lock"),
)
"""The node's network namespace is the machine's: so are the pods' netns (the runner's sandboxes make
them in /run/netns) and the lock of its iptables."""


@dataclass(frozen=True, slots=True)
class NodeRoot:
    root: Path

    def host(self, path: str) -> Path:
        p = Path(path)
        if any(p == s or s in p.parents for s in SHARED_WITH_MACHINE):
            return p
        return self.root / p.relative_to("/")


@dataclass(frozen=True, slots=True)
class Mount:
    source: Path
    target: str
    read_only: bool
    propagation: str = ""
    """podman's bind-propagation: rshared (Bidirectional), rslave (HostToContainer) or ""."""


@dataclass
class PodVolumes:
    node: NodeRoot
    pod_dir: Path
    lookup: Lookup
    tokens: TokenSource
    made: dict[str, Path] = field(default_factory=dict)
    claims: ClaimMounter | None = None
    """persistentVolumeClaim volumes (nodeenv/kubelet/storage/csivolumes.py); None: refused."""

    def make(self, ctx: PodContext) -> None:
        for vol in ctx.pod["spec"].get("volumes") or []:
            self.made[vol["name"]] = self._make(ctx, vol)

    def _make(self, ctx: PodContext, vol: Obj) -> Path:
        if "hostPath" in vol:
            return self._host_path(vol["hostPath"])
        if "persistentVolumeClaim" in vol and self.claims is not None:
            return self.claims(ctx, vol)
        target: Path = self.pod_dir / "volumes" / vol["name"]
        target.mkdir(parents=True, exist_ok=True)
        ns = ctx.pod["metadata"]["namespace"]
        if "emptyDir" in vol:
            target.chmod(0o777)  # kubelet makes emptyDir 0777 so any runAsUser may write
        elif "configMap" in vol or "secret" in vol:
            kind = "configmaps" if "configMap" in vol else "secrets"
            src = vol.get("configMap") or vol["secret"]
            name = src.get("name") or src.get("secretName", "")
            files = self._files(kind, ns, name, src)
            _write(target, files, int(src.get("defaultMode", 0o644)), fs_group(ctx.pod))
        elif "projected" in vol:
            _write(
                target,
                self._projected(ctx, vol["projected"]),
                int(vol["projected"].get("defaultMode", 0o644)),
            )
        else:
            raise ConfigError(f"volume {vol['name']}: unsupported volume type {sorted(set(vol) - {'name'})}")
        return target

    def _host_path(self, src: Obj) -> Path:
        path, kind = self.node.host(src["path"]), src.get("type", "")
        if kind == "DirectoryOrCreate":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "FileOrCreate":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(exist_ok=True)
        elif kind == "Directory" and not path.is_dir():
            raise ConfigError(f"hostPath type check failed: {src['path']} is not a directory")
        elif kind == "File" and not path.is_file():
            raise ConfigError(f"hostPath type check failed: {src['path']} is not a file")
        elif kind == "Socket" and not path.is_socket():
            raise ConfigError(f"hostPath type check failed: {src['path']} is not a socket file")
        elif not kind and not path.exists():
            # no type, no check: containerd makes a missing bind source a directory (the node's own
            # when the machine lacks a tree it would share, e.g. /lib/modules in a container)
            path = self.node.root / Path(src["path"]).relative_to("/")
            path.mkdir(parents=True, exist_ok=True)
        return path

    def _files(self, kind: str, ns: str, name: str, src: Obj) -> dict[str, bytes]:
        obj = self.lookup(kind, ns, name)
        label = "configmap" if kind == "configmaps" else "secret"
        if obj is None:
            if src.get("optional"):
                return {}
            raise ConfigError(f'{label} "{name}" not found')
        if kind == "secrets":
            data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        else:
            data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
            data |= {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
        items = src.get("items")
        if not items:
            return data
        out = {}
        for item in items:
            if item["key"] not in data:
                if src.get("optional"):
                    continue
                raise ConfigError(f"configmap references non-existent config key: {item['key']}")
            out[item["path"]] = data[item["key"]]
        return out

    def _projected(self, ctx: PodContext, proj: Obj) -> dict[str, bytes]:
        ns, out = ctx.pod["metadata"]["namespace"], {}
        for source in proj.get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                sa = ctx.pod["spec"].get("serviceAccountName", "default")
                out[sat["path"]] = self.tokens(ns, sa, int(sat.get("expirationSeconds", 3600))).encode()
            elif "configMap" in source or "secret" in source:
                kind = "configmaps" if "configMap" in source else "secrets"
                src = source.get("configMap") or source["secret"]
                out |= self._files(kind, ns, src.get("name", ""), src)
            elif "downwardAPI" in source:
                for item in source["downwardAPI"].get("items") or []:
                    out[item["path"]] = field_ref(ctx, item["fieldRef"]["fieldPath"]).encode()
        return out

    def mounts(self, container: Obj) -> list[Mount]:
        out = []
        for m in container.get("volumeMounts") or []:
            if m["name"] not in self.made:
                raise ConfigError(f"volumeMount {m['name']!r}: no volume of that name in the pod")
            source = self.made[m["name"]] / m.get("subPath", "")
            prop = {"Bidirectional": "rshared", "HostToContainer": "rslave"}.get(
                m.get("mountPropagation", ""), ""
            )
            out.append(Mount(source, m["mountPath"], bool(m.get("readOnly")), prop))
        return out


def fs_group(pod: Obj) -> int | None:
    value = (pod["spec"].get("securityContext") or {}).get("fsGroup")
    return None if value is None else int(value)


def _write(target: Path, files: dict[str, bytes], mode: int, gid: int | None = None) -> None:
    """The files, `mode` each; with a pod's fsGroup `gid` owned by that group and group-readable,
    as kubelet's volume ownership makes a read-only volume (mode | 0440)."""
    for rel, data in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if gid is not None:
            os.chown(path, -1, gid)
        path.chmod(mode | (0o440 if gid is not None else 0))
