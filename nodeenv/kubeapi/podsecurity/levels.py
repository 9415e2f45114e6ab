"""Levels, versions and the per-namespace policy, as k8s.io/pod-security-admission/api parses them.

`PolicyToEvaluate`: each of enforce/audit/warn takes its level and version from the namespace's
`pod-security.kubernetes.io/<mode>[-version]` labels, else from the cluster defaults. An invalid
enforce level evaluates as `restricted` (fail closed), an invalid audit/warn level as `privileged`
(fail open), an invalid version as `latest`; each invalid label is a field error (the namespace's
422). warn follows an explicitly set, stricter enforce level when warn is not labelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

Level = Literal["privileged", "baseline", "restricted"]
LEVELS: tuple[Level, ...] = ("privileged", "baseline", "restricted")
PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
FieldError = tuple[str, str, str]
"""(field path, value, message) as field.Invalid: metadata.labels[<key>], the value, why."""
_VERSION = re.compile(r"^v1\.([0-9]|[1-9][0-9]*)$")
_LEVEL_RULE = "must be one of " + ", ".join(LEVELS)
_VERSION_RULE = 'must be "latest" or "v1.x"'


@dataclass(frozen=True, slots=True, order=True)
class Version:
    """v1.<minor>, or latest (minor None): newer than every numbered version."""

    minor: int | None = None

    @property
    def latest(self) -> bool:
        return self.minor is None

    def older(self, other: Version) -> bool:
        if self.minor is None:
            return False
        return other.minor is None or self.minor < other.minor

    def __str__(self) -> str:
        return "latest" if self.minor is None else f"v1.{self.minor}"


LATEST = Version()


@dataclass(frozen=True, slots=True)
class LevelVersion:
    level: Level
    version: Version = LATEST

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"

    def equivalent(self, other: LevelVersion) -> bool:
        return (self.level == other.level == "privileged") or self == other


@dataclass(frozen=True, slots=True)
class Policy:
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion

    def fully_privileged(self) -> bool:
        return self.enforce.level == self.audit.level == self.warn.level == "privileged"

    def equivalent(self, other: Policy) -> bool:
        return all(getattr(self, m).equivalent(getattr(other, m)) for m in MODES)


PRIVILEGED = LevelVersion("privileged")
ALL_PRIVILEGED = Policy(PRIVILEGED, PRIVILEGED, PRIVILEGED)


def parse_level(text: str) -> Level | None:
    return next((lv for lv in LEVELS if lv == text), None)


def parse_version(text: str) -> Version | None:
    if text == "latest":
        return LATEST
    m = _VERSION.match(text)
    return Version(int(m.group(1))) if m else None


def compare_levels(a: Level, b: Level) -> int:
    """-1, 0, 1 as `a` is less strict, as strict, stricter than `b`."""
    return (LEVELS.index(a) > LEVELS.index(b)) - (LEVELS.index(a) < LEVELS.index(b))


def policy_to_evaluate(labels: Mapping[str, str] | None, defaults: Policy) -> tuple[Policy, list[FieldError]]:
    labels = labels or {}
    errors: list[FieldError] = []
    modes = {m: getattr(defaults, m) for m in MODES}
    has_enforce_level = False
    for mode in MODES:
        lv = modes[mode]
        key = PREFIX + mode
        if key in labels:
            level = parse_level(labels[key])
            if level is None:
                errors.append((f"metadata.labels[{key}]", labels[key], _LEVEL_RULE))
                level = "restricted" if mode == "enforce" else "privileged"
            has_enforce_level = has_enforce_level or (mode == "enforce" and level == labels[key])
            lv = replace(lv, level=level)
        if key + "-version" in labels:
            version = parse_version(labels[key + "-version"])
            if version is None:
                errors.append((f"metadata.labels[{key}-version]", labels[key + "-version"], _VERSION_RULE))
                version = LATEST
            lv = replace(lv, version=version)
        modes[mode] = lv
    enforce, warn = modes["enforce"], modes["warn"]
    if PREFIX + "warn" not in labels and has_enforce_level and compare_levels(enforce.level, warn.level) > 0:
        version = warn.version if PREFIX + "warn-version" in labels else enforce.version
        modes["warn"] = LevelVersion(enforce.level, version)
    return Policy(**modes), errors
