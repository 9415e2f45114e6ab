"""The Baseline checks of the Pod Security Standards, one pure function per check and version
(k8s.io/pod-security-admission/policy/check_*.go; the reasons and details are theirs, word for word).
Each takes the pod's metadata and spec as JSON and returns None or the Violation."""

from __future__ import annotations

from nodeenv.kubeapi.podsecurity.spec import (
    Check,
    Obj,
    Violation,
    containers,
    containers_phrase,
    containers_violation,
    dig,
    go_quote,
    items,
    join_quote,
    name,
    plural,
    sc,
    setters,
    user_namespace,
    uses,
)

APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"
DEFAULT_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
SELINUX_TYPES_1_31 = SELINUX_TYPES_1_0 | {"container_engine_t"}
SYSCTLS_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
SYSCTLS_1_27 = SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_1_29 = SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SYSCTLS_1_32 = SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
SYSCTLS_1_37 = SYSCTLS_1_32 | {"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}


def privileged(meta: Obj, spec: Obj) -> Violation | None:
    bad = [name(c) for c in containers(spec) if sc(c).get("privileged") is True]
    return containers_violation("privileged", bad, "must not set securityContext.privileged=true")


def host_process(meta: Obj, spec: Obj) -> Violation | None:
    bad = [name(c) for c in containers(spec) if dig(sc(c), "windowsOptions", "hostProcess") is True]
    who = setters(dig(spec, "securityContext", "windowsOptions", "hostProcess") is True, bad)
    if not who:
        return None
    return Violation(
        "hostProcess", f"{' and '.join(who)} must not set securityContext.windowsOptions.hostProcess=true"
    )


def host_namespaces(meta: Obj, spec: Obj) -> Violation | None:
    shared = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    return Violation("host namespaces", ", ".join(shared)) if shared else None


def host_path_volumes(meta: Obj, spec: Obj) -> Violation | None:
    bad = [str(v.get("name") or "") for v in items(spec, "volumes") if v.get("hostPath") is not None]
    if not bad:
        return None
    return Violation("hostPath volumes", f"{plural('volume', 'volumes', len(bad))} {join_quote(bad)}")


def host_ports(meta: Obj, spec: Obj) -> Violation | None:
    bad, ports = [], set()
    for c in containers(spec):
        used = {str(p["hostPort"]) for p in items(c, "ports") if p.get("hostPort") not in (None, 0)}
        if used:
            bad.append(name(c))
            ports |= used
    if not bad:
        return None
    return Violation("hostPort", uses("container", bad, "hostPort", len(ports), ", ".join(sorted(ports))))


def _hosts(handler: object) -> list[str]:
    return [h for k in ("httpGet", "tcpSocket") if (h := dig(handler, k, "host"))]


def host_probes_and_lifecycle(meta: Obj, spec: Obj) -> Violation | None:
    bad, hosts = set(), set()
    for c in containers(spec):
        found = [h for p in ("livenessProbe", "readinessProbe", "startupProbe") for h in _hosts(c.get(p))]
        found += [h for p in ("postStart", "preStop") for h in _hosts(dig(c, "lifecycle", p))]
        if found:
            bad.add(name(c))
            hosts.update(found)
    if not bad:
        return None
    detail = uses("container", sorted(bad), "probe or lifecycle host", len(hosts), join_quote(sorted(hosts)))
    return Violation("probe or lifecycle host", detail)


def capabilities(meta: Obj, spec: Obj) -> Violation | None:
    bad, caps = [], set()
    for c in containers(spec):
        added = {str(x) for x in dig(sc(c), "capabilities", "add") or ()} - DEFAULT_CAPABILITIES
        if added:
            bad.append(name(c))
            caps |= added
    if not bad:
        return None
    return Violation(
        "non-default capabilities",
        f"{containers_phrase(bad)} must not include "
        f"{join_quote(sorted(caps))} in securityContext.capabilities.add",
    )


def app_armor(meta: Obj, spec: Obj) -> Violation | None:
    allowed = ("RuntimeDefault", "Localhost")
    values: set[str] = set()
    pod_type = dig(spec, "securityContext", "appArmorProfile", "type")
    pod_bad = dig(spec, "securityContext", "appArmorProfile") is not None and pod_type not in allowed
    if pod_bad:
        values.add(str(pod_type or ""))
    bad = []
    for c in containers(spec):
        t = dig(sc(c), "appArmorProfile", "type")
        if sc(c).get("appArmorProfile") is not None and t not in allowed:
            bad.append(name(c))
            values.add(str(t or ""))
    notes = dict(meta.get("annotations") or {})
    annotations = sorted(
        f"{k}={go_quote(str(v))}"
        for k, v in notes.items()
        if k.startswith(APPARMOR_ANNOTATION)
        and v
        and v != "runtime/default"
        and not str(v).startswith("localhost/")
    )
    who = setters(pod_bad, bad) + (
        [plural("annotation", "annotations", len(annotations))] if annotations else []
    )
    if not who:
        return None
    listed = sorted(values) + annotations
    return Violation(
        plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(listed)),
        f"{' and '.join(who)} must not set AppArmor profile type to {join_quote(listed)}",
    )


def _selinux(allowed: frozenset[str]) -> Check:
    def check(meta: Obj, spec: Obj) -> Violation | None:
        types: set[str] = set()
        user = role = False

        def valid(opts: Obj) -> bool:
            nonlocal user, role
            t = str(opts.get("type") or "")
            if t not in allowed:
                types.add(t)
            user, role = user or bool(opts.get("user")), role or bool(opts.get("role"))
            return t in allowed and not opts.get("user") and not opts.get("role")

        pod_opts = dig(spec, "securityContext", "seLinuxOptions")
        pod_bad = isinstance(pod_opts, dict) and not valid(pod_opts)
        bad = [
            name(c)
            for c in containers(spec)
            if isinstance(o := sc(c).get("seLinuxOptions"), dict) and not valid(o)
        ]
        who = setters(pod_bad, bad)
        if not who:
            return None
        data = [f"{plural('type', 'types', len(types))} {join_quote(sorted(types))}"] if types else []
        data += ["user may not be set"] * user + ["role may not be set"] * role
        return Violation(
            "seLinuxOptions",
            f"{' and '.join(who)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
        )

    return check


selinux_1_0 = _selinux(SELINUX_TYPES_1_0)
selinux_1_31 = _selinux(SELINUX_TYPES_1_31)


def proc_mount_1_0(meta: Obj, spec: Obj) -> Violation | None:
    bad, kinds = [], set()
    for c in containers(spec):
        pm = sc(c).get("procMount")
        if pm is not None and pm != "Default":
            bad.append(name(c))
            kinds.add(str(pm))
    return containers_violation(
        "procMount", bad, f"must not set securityContext.procMount to {join_quote(sorted(kinds))}"
    )


def proc_mount_1_35(meta: Obj, spec: Obj) -> Violation | None:
    return None if user_namespace(spec) else proc_mount_1_0(meta, spec)


def seccomp_annotations_1_0(meta: Obj, spec: Obj) -> Violation | None:
    notes = dict(meta.get("annotations") or {})

    def ok(v: object) -> bool:
        return v in ("runtime/default", "docker/default") or str(v).startswith("localhost/")

    keys = [SECCOMP_POD_ANNOTATION] + [SECCOMP_CONTAINER_ANNOTATION + name(c) for c in containers(spec)]
    bad = sorted({f"{k}={go_quote(str(notes[k]))}" for k in keys if k in notes and not ok(notes[k])})
    if not bad:
        return None
    return Violation(
        "seccompProfile", f"forbidden {plural('annotation', 'annotations', len(bad))} {', '.join(bad)}"
    )


SECCOMP_ALLOWED = ("RuntimeDefault", "Localhost")


def seccomp_explicit(spec: Obj) -> tuple[list[str], set[str], bool]:
    """(setters of a bad seccompProfile.type, the bad values, whether the pod sets a good one)."""
    values: set[str] = set()
    pod = dig(spec, "securityContext", "seccompProfile")
    pod_bad = isinstance(pod, dict) and pod.get("type") not in SECCOMP_ALLOWED
    if pod_bad:
        values.add(str(dig(pod, "type") or ""))
    bad = []
    for c in containers(spec):
        prof = sc(c).get("seccompProfile")
        if isinstance(prof, dict) and prof.get("type") not in SECCOMP_ALLOWED:
            bad.append(name(c))
            values.add(str(prof.get("type") or ""))
    return setters(pod_bad, bad), values, isinstance(pod, dict) and not pod_bad


def seccomp_1_19(meta: Obj, spec: Obj) -> Violation | None:
    who, values, _ = seccomp_explicit(spec)
    if not who:
        return None
    return Violation(
        "seccompProfile",
        f"{' and '.join(who)} must not set securityContext.seccompProfile.type to "
        f"{join_quote(sorted(values))}",
    )


def _sysctls(allowed: frozenset[str]) -> Check:
    def check(meta: Obj, spec: Obj) -> Violation | None:
        bad = [
            str(s.get("name"))
            for s in items(spec.get("securityContext"), "sysctls")
            if s.get("name") not in allowed
        ]
        return Violation("forbidden sysctls", ", ".join(bad)) if bad else None

    return check


sysctls_1_0, sysctls_1_27, sysctls_1_29 = (
    _sysctls(SYSCTLS_1_0),
    _sysctls(SYSCTLS_1_27),
    _sysctls(SYSCTLS_1_29),
)
sysctls_1_32, sysctls_1_37 = _sysctls(SYSCTLS_1_32), _sysctls(SYSCTLS_1_37)
