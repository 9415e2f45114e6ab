"""The PodSecurity plugin's configuration, as kube-apiserver reads it from the file its
`--admission-control-config-file` names: an apiserver.config.k8s.io/v1 AdmissionConfiguration whose
`PodSecurity` plugin entry holds a pod-security.admission.config.k8s.io/v1 PodSecurityConfiguration
inline (`configuration:`) or in another file (`path:`, relative to the first), or that
PodSecurityConfiguration alone. Unset defaults are `privileged` at `latest` (kube-apiserver's own
defaults: nothing enforced); exemptions (usernames, namespaces, runtimeClasses) none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from nodeenv.kubeapi.podsecurity.levels import (
    ALL_PRIVILEGED,
    MODES,
    LevelVersion,
    Policy,
    parse_level,
    parse_version,
)

KIND = "PodSecurityConfiguration"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSecurityConfig:
    defaults: Policy = ALL_PRIVILEGED
    usernames: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    runtime_classes: frozenset[str] = frozenset()

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any]) -> PodSecurityConfig:
        """A PodSecurityConfiguration; ValueError naming each invalid field."""
        d, ex = doc.get("defaults") or {}, doc.get("exemptions") or {}
        errors, modes = [], {}
        for mode in MODES:
            level, version = (
                parse_level(str(d.get(mode, "privileged"))),
                parse_version(str(d.get(f"{mode}-version", "latest"))),
            )
            if level is None:
                errors.append(f"defaults.{mode}: Invalid value: {d.get(mode)!r}")
            if version is None:
                errors.append(f"defaults.{mode}-version: Invalid value: {d.get(f'{mode}-version')!r}")
            if level is not None and version is not None:
                modes[mode] = LevelVersion(level, version)
        lists = {k: ex.get(k) or [] for k in ("usernames", "namespaces", "runtimeClasses")}
        for key, values in lists.items():
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                errors.append(f"exemptions.{key}: must be a list of non-empty strings")
            elif len(set(values)) != len(values):
                errors.append(f"exemptions.{key}: Duplicate value")
        if errors:
            raise ValueError(f"invalid {KIND}: " + "; ".join(errors))
        return cls(
            defaults=Policy(**modes),
            usernames=frozenset(lists["usernames"]),
            namespaces=frozenset(lists["namespaces"]),
            runtime_classes=frozenset(lists["runtimeClasses"]),
        )

    @classmethod
    def load(cls, path: Path) -> PodSecurityConfig:
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: {e}") from e
        if not isinstance(doc, Mapping):
            raise ValueError(f"{path}: not a mapping")
        if doc.get("kind") == KIND:
            return cls.from_mapping(doc)
        if doc.get("kind") != "AdmissionConfiguration":
            raise ValueError(f"{path}: kind {doc.get('kind')!r}: want AdmissionConfiguration or {KIND}")
        for plugin in doc.get("plugins") or []:
            if isinstance(plugin, Mapping) and plugin.get("name") == "PodSecurity":
                if isinstance(plugin.get("configuration"), Mapping):
                    return cls.from_mapping(plugin["configuration"])
                if plugin.get("path"):
                    return cls.load(path.parent / str(plugin["path"]))
                raise ValueError(f"{path}: the PodSecurity plugin has neither configuration nor path")
        return cls()  # no PodSecurity entry: the plugin's defaults
