"""Which checks make a level at a version, in the order their messages list them
(k8s.io/pod-security-admission/policy/registry.go), and the aggregate result.

Every check lists the versions its behaviour changed at; at version v a check runs its newest
entry not newer than v (a check whose first entry is newer than v does not run). Restricted is the
Restricted checks plus the Baseline checks none of them overrides at v. Messages list the Baseline
checks by ID, then the Restricted ones (IDs sorted bytewise, as Go's sort). `latest` and any
version newer than the newest entry evaluate at the newest entry (MAX_VERSION).
"""

from __future__ import annotations

from dataclasses import dataclass

from nodeenv.kubeapi.podsecurity import baseline as b
from nodeenv.kubeapi.podsecurity import restricted as r
from nodeenv.kubeapi.podsecurity.levels import LevelVersion
from nodeenv.kubeapi.podsecurity.spec import Check, Obj, Violation


@dataclass(frozen=True, slots=True)
class Entry:
    minor: int
    """first v1.<minor> this behaviour applies to"""
    check: Check
    overrides: tuple[str, ...] = ()


BASELINE: dict[str, tuple[Entry, ...]] = {
    "appArmorProfile": (Entry(0, b.app_armor),),
    "capabilities_baseline": (Entry(0, b.capabilities),),
    "hostNamespaces": (Entry(0, b.host_namespaces),),
    "hostPathVolumes": (Entry(0, b.host_path_volumes),),
    "hostPorts": (Entry(0, b.host_ports),),
    "hostProbesAndHostLifecycle": (Entry(34, b.host_probes_and_lifecycle),),
    "privileged": (Entry(0, b.privileged),),
    "procMount": (Entry(0, b.proc_mount_1_0), Entry(35, b.proc_mount_1_35)),
    "seLinuxOptions": (Entry(0, b.selinux_1_0), Entry(31, b.selinux_1_31)),
    "seccompProfile_baseline": (Entry(0, b.seccomp_annotations_1_0), Entry(19, b.seccomp_1_19)),
    "sysctls": (
        Entry(0, b.sysctls_1_0),
        Entry(27, b.sysctls_1_27),
        Entry(29, b.sysctls_1_29),
        Entry(32, b.sysctls_1_32),
        Entry(37, b.sysctls_1_37),
    ),
    "windowsHostProcess": (Entry(0, b.host_process),),
}
RESTRICTED: dict[str, tuple[Entry, ...]] = {
    "allowPrivilegeEscalation": (
        Entry(8, r.privilege_escalation_1_8),
        Entry(25, r.privilege_escalation_1_25),
    ),
    "capabilities_restricted": (
        Entry(22, r.capabilities_1_22, ("capabilities_baseline",)),
        Entry(25, r.capabilities_1_25, ("capabilities_baseline",)),
    ),
    "procMount_restricted": (Entry(35, r.proc_mount, ("procMount",)),),
    "restrictedVolumes": (Entry(0, r.volumes, ("hostPathVolumes",)),),
    "runAsNonRoot": (Entry(0, r.run_as_non_root_1_0), Entry(35, r.run_as_non_root_1_35)),
    "runAsUser": (Entry(23, r.run_as_user_1_23), Entry(35, r.run_as_user_1_35)),
    "seccompProfile_restricted": (
        Entry(19, r.seccomp_1_19, ("seccompProfile_baseline",)),
        Entry(25, r.seccomp_1_25, ("seccompProfile_baseline",)),
    ),
}
MAX_VERSION = max(e.minor for table in (BASELINE, RESTRICTED) for entries in table.values() for e in entries)


def _at(entries: tuple[Entry, ...], minor: int) -> Entry | None:
    return next((e for e in reversed(entries) if e.minor <= minor), None)


def checks_for(lv: LevelVersion) -> list[tuple[str, Check]]:
    """(check ID, function) that make `lv`, in message order; none for privileged."""
    if lv.level == "privileged":
        return []
    minor = MAX_VERSION if lv.version.minor is None else min(lv.version.minor, MAX_VERSION)
    base = {cid: e for cid, entries in BASELINE.items() if (e := _at(entries, minor))}
    extra: dict[str, Entry] = {}
    if lv.level == "restricted":
        extra = {cid: e for cid, entries in RESTRICTED.items() if (e := _at(entries, minor))}
        for e in extra.values():
            for cid in e.overrides:
                base.pop(cid, None)
    return [(cid, table[cid].check) for table in (base, extra) for cid in sorted(table)]


def evaluate(lv: LevelVersion, meta: Obj, spec: Obj) -> list[Violation]:
    """The violations of the pod (metadata, spec) at `lv`, in message order; [] when allowed."""
    return [v for _, check in checks_for(lv) if (v := check(meta, spec)) is not None]


def forbidden_detail(violations: list[Violation]) -> str:
    """`reason (detail), reason, ...` (AggregateCheckResult.ForbiddenDetail)."""
    return ", ".join(f"{v.reason} ({v.detail})" if v.detail else v.reason for v in violations)


def forbidden_reason(violations: list[Violation]) -> str:
    return ", ".join(v.reason for v in violations)
