"""Policy verdict logging: annotations → the OVN ACL columns `log`, `severity`, `name`, `meter` (pure).

Shared by every translation that writes ACLs (NetworkPolicy, AdminNetworkPolicy,
BaselineAdminNetworkPolicy). The setting is an annotation, as ovn-kubernetes's
`k8s.ovn.org/acl-logging`:

    plasmacloud.io/acl-logging: '{"deny": "alert", "allow": "notice"}'

on a Namespace (its NetworkPolicies' allow ACLs and its default-deny drops) or on an ANP/BANP
(its rules; "pass" is accepted for Pass rules). A verdict absent from the object, or a severity
OVN does not know, is not logged. Every logged ACL names the cluster-wide meter METER, so
ovn-controller sends at most the meter's rate of log packets per node (fair: per ACL).

The ACL `name` (at most 63 characters in the OVN NB schema) is the policy's reference
`<kind>/<namespace>/<name>` (kind `np`, `np-deny` for a namespace's default deny, `anp`, `banp`;
namespace empty for cluster-scoped kinds). When longer, the name (and a namespace over ~48
characters) is cut and ends in `~` and 8 hex digits of the whole reference's SHA-1, so distinct
policies keep distinct names; parse_reference reads it back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

ANNOTATION = "plasmacloud.io/acl-logging"
SEVERITIES = ("alert", "warning", "notice", "info", "debug")
VERDICTS = ("allow", "deny", "pass")
METER = "acl-logging"
NAME_MAX = 63
KINDS = ("np", "np-deny", "anp", "banp")


@dataclass(frozen=True, slots=True)
class LogSetting:
    """What an object's annotation asks for: a severity per verdict, None where not logged."""

    allow: str | None = None
    deny: str | None = None
    pass_: str | None = None

    def severity(self, verdict: str) -> str | None:
        return {"allow": self.allow, "deny": self.deny, "pass": self.pass_}.get(verdict)


OFF = LogSetting()


@dataclass(frozen=True, slots=True, order=True)
class AclLog:
    """The ACL columns of a logged ACL."""

    name: str
    severity: str
    meter: str = METER


class InvalidLogSetting(ValueError):
    pass


def parse_setting(annotations: Mapping[str, str] | None) -> LogSetting:
    """The object's annotation read (OFF when absent); InvalidLogSetting names what is wrong."""
    raw = (annotations or {}).get(ANNOTATION)
    if raw is None:
        return OFF
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise InvalidLogSetting(f"{ANNOTATION} is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InvalidLogSetting(f"{ANNOTATION} must be a JSON object of verdict: severity")
    unknown = sorted(set(doc) - set(VERDICTS))
    if unknown:
        raise InvalidLogSetting(f"{ANNOTATION}: unknown verdict(s) {unknown}; known {list(VERDICTS)}")
    for verdict, sev in doc.items():
        if sev not in SEVERITIES:
            raise InvalidLogSetting(
                f"{ANNOTATION}: {verdict} severity {sev!r} is not one of {list(SEVERITIES)}"
            )
    return LogSetting(allow=doc.get("allow"), deny=doc.get("deny"), pass_=doc.get("pass"))


def setting_or_off(annotations: Mapping[str, str] | None) -> LogSetting:
    """parse_setting, with an invalid annotation logging nothing (a tenant's typo opens nothing)."""
    try:
        return parse_setting(annotations)
    except InvalidLogSetting:
        return OFF


def reference(kind: str, namespace: str, name: str) -> str:
    """The ACL name of a policy: `<kind>/<namespace>/<name>`, at most NAME_MAX characters."""
    if kind not in KINDS:
        raise ValueError(f"unknown policy kind {kind!r}")
    ref = f"{kind}/{namespace}/{name}"
    if len(ref) <= NAME_MAX:
        return ref
    digest = hashlib.sha1(ref.encode()).hexdigest()[:8]
    room = NAME_MAX - len(kind) - 2 - 9  # the two slashes, "~" and the digest
    namespace = namespace[: room - 1]  # whole unless longer than the room (a 1-char name left)
    return f"{kind}/{namespace}/{name[: room - len(namespace)]}~{digest}"


@dataclass(frozen=True, slots=True)
class PolicyRef:
    kind: str
    namespace: str
    name: str
    truncated: bool


def parse_reference(name: str) -> PolicyRef | None:
    """An ACL name written by reference() read back; None for anyone else's name."""
    kind, sep, rest = name.partition("/")
    namespace, sep2, policy = rest.partition("/")
    if kind not in KINDS or not sep or not sep2:
        return None
    return PolicyRef(kind, namespace, policy, len(name) == NAME_MAX and "~" in policy)


def acl_log(setting: LogSetting, verdict: str, ref: str) -> AclLog | None:
    """The columns for an ACL with this verdict (`allow`, `deny`, `pass`) under `setting`."""
    severity = setting.severity(verdict)
    return None if severity is None else AclLog(ref, severity)


def verdict_of(action: str) -> str:
    """The verdict an OVN ACL action stands for."""
    return {"allow": "allow", "allow-related": "allow", "allow-stateless": "allow", "drop": "deny",
            "reject": "deny", "pass": "pass"}[action]  # fmt: skip
