"""Every Deployment/DaemonSet: resources, liveness/readiness probes on the health endpoints its program
really serves, and securityContexts that meet the Pod Security Standard level the table below gives it,
with only the capabilities the table names and why. A workload missing from the table fails: a new
manifest has to say what it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.unit.daemonsets import programs
from tests.unit.daemonsets.rendered import SUITE_IMAGE, container_env, containers, ident, pod_spec, workloads

Obj = dict[str, Any]
# https://kubernetes.io/docs/concepts/security/pod-security-standards/
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                 "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}  # fmt: skip


@dataclass(frozen=True)
class Needs:
    """What a workload may use. level: the Pod Security Standard it meets. privileged: containers that
    run privileged; caps: capabilities added per container; every entry says why."""

    level: str
    why: str
    privileged: frozenset[str] = frozenset()
    caps: dict[str, frozenset[str]] = field(default_factory=dict)
    read_only_root: bool = True


NEEDS: dict[str, Needs] = {
    "ovn-central": Needs(
        "privileged",
        "host network (NB/SB on host ports before the pod network exists) and the databases on a hostPath",
        read_only_root=False,
    ),
    "ovs-node": Needs(
        "privileged",
        "ovs-vswitchd owns the node's datapath and br-int",
        privileged=frozenset({"openvswitch", "ovn-controller"}),
        read_only_root=False,
    ),
    "prismnet-agent": Needs(
        "privileged",
        "host network and /run/netns: veth pairs, addresses and routes in pod namespaces (setns: SYS_ADMIN),"
        " the management port and the masquerade rule (NET_ADMIN, NET_RAW), /proc/sys forwarding (read-only"
        " unless privileged); the installer needs nothing but root",
        privileged=frozenset({"prismnet-agent"}),
        read_only_root=False,
    ),
    "lightningstor-csi-node": Needs(
        "privileged",
        "mount/mkfs on host block devices with Bidirectional propagation into kubelet's pod dirs",
        privileged=frozenset({"lightningstor-csi"}),
        read_only_root=False,
    ),
    "lightningstor-csi-controller": Needs("restricted", "API calls and gRPC only"),
    "iam-webhook": Needs("privileged", "host network: kube-apiserver calls 127.0.0.1:3000 on its own node"),
    "fiberlb-controller": Needs("privileged", "host network: the OVN NB is a host address"),
    "netpol-controller": Needs("privileged", "host network: the OVN NB is a host address"),
    "node-controller": Needs("privileged", "host network: the OVN NB and SB are host addresses"),
    "flashdns-controller": Needs(
        "restricted",
        "serves DNS on port 53 of its pod IP as nobody: the safe ip_unprivileged_port_start sysctl",
    ),
    "project-controller": Needs("restricted", "API calls only"),
}
SUITE_CONTROLLERS = {"iam-webhook", "fiberlb-controller", "netpol-controller", "flashdns-controller",
                     "project-controller", "node-controller"}  # fmt: skip


# Gaps found in manifests other helpers are still changing, fixed in step (strict: an entry whose gap
# is fixed fails until removed).
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def _cases(check: str) -> list[Any]:
    out = []
    for w in workloads():
        gap = KNOWN_GAPS.get((check, w["metadata"]["name"]))
        marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
        out.append(pytest.param(w, marks=marks, id=ident(w)))
    return out


def _name(w: Obj) -> str:
    name: str = w["metadata"]["name"]
    return name


def _sc(pod: Obj, c: Obj, key: str) -> Any:
    """A container's effective security setting (container over pod securityContext)."""
    own = (c.get("securityContext") or {}).get(key)
    return own if own is not None else (pod.get("securityContext") or {}).get(key)


def baseline_violations(w: Obj, needs: Needs) -> list[str]:
    pod, out = pod_spec(w), []
    out += [f"pod uses {k}" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    out += [f"hostPath volume {v['name']}" for v in pod.get("volumes") or [] if "hostPath" in v]
    sysctls = {x["name"] for x in (pod.get("securityContext") or {}).get("sysctls") or []}
    out += [f"unsafe sysctl {x}" for x in sorted(sysctls - SAFE_SYSCTLS)]
    for c in containers(w):
        sc = c.get("securityContext") or {}
        out += [f"{c['name']}: privileged"] if sc.get("privileged") else []
        out += [f"{c['name']}: hostPort" for p in c.get("ports") or [] if p.get("hostPort")]
        extra = set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPS
        out += [f"{c['name']}: adds {sorted(extra)}"] if extra else []
        if (_sc(pod, c, "seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"{c['name']}: seccomp Unconfined")
    return out


def restricted_violations(w: Obj) -> list[str]:
    pod, out = pod_spec(w), []
    out += [
        f"volume {v['name']}" for v in pod.get("volumes") or [] if not set(v) - {"name"} <= RESTRICTED_VOLUMES
    ]
    for c in containers(w):
        sc = c.get("securityContext") or {}
        out += (
            [f"{c['name']}: allowPrivilegeEscalation"]
            if sc.get("allowPrivilegeEscalation") is not False
            else []
        )
        out += [f"{c['name']}: may run as root"] if _sc(pod, c, "runAsNonRoot") is not True else []
        out += [f"{c['name']}: runAsUser 0"] if _sc(pod, c, "runAsUser") == 0 else []
        caps = sc.get("capabilities") or {}
        out += [f"{c['name']}: must drop ALL"] if "ALL" not in (caps.get("drop") or []) else []
        out += (
            [f"{c['name']}: adds {caps['add']}"] if set(caps.get("add") or []) - {"NET_BIND_SERVICE"} else []
        )
        seccomp = (_sc(pod, c, "seccompProfile") or {}).get("type")
        out += (
            [f"{c['name']}: seccompProfile {seccomp}"]
            if seccomp not in ("RuntimeDefault", "Localhost")
            else []
        )
    return out


def least_privilege_violations(w: Obj, needs: Needs) -> list[str]:
    """Whatever the level: privileged and added capabilities only where the table says."""
    out = []
    for c in containers(w):
        sc = c.get("securityContext") or {}
        if sc.get("privileged") and c["name"] not in needs.privileged:
            out.append(f"{c['name']}: privileged, not in the table")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - needs.caps.get(c["name"], frozenset()):
            out.append(
                f"{c['name']}: adds {sorted(added)}, the table allows {sorted(needs.caps.get(c['name'], []))}"
            )
        if not sc.get("privileged") and "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            out.append(f"{c['name']}: drop ALL first, then add what it needs")
        if not sc.get("privileged") and sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{c['name']}: allowPrivilegeEscalation must be false")
        if _sc(pod_spec(w), c, "runAsNonRoot") and not _sc(pod_spec(w), c, "runAsUser"):
            out.append(
                f"{c['name']}: runAsNonRoot needs runAsUser (the image's user is root: kubelet refuses it)"
            )
        if needs.read_only_root and not sc.get("readOnlyRootFilesystem"):
            out.append(f"{c['name']}: readOnlyRootFilesystem")
    return out


def check(w: Obj) -> list[str]:
    needs = NEEDS.get(_name(w))
    assert needs is not None, f"{ident(w)}: add it to NEEDS in {__name__} (its PSS level and why)"
    out = least_privilege_violations(w, needs)
    if needs.level in ("baseline", "restricted"):
        out += baseline_violations(w, needs)
    if needs.level == "restricted":
        out += restricted_violations(w)
    if _name(w) in SUITE_CONTROLLERS:
        pod = pod_spec(w)
        out += [
            f"{c['name']}: must run as non-root"
            for c in containers(w)
            if _sc(pod, c, "runAsNonRoot") is not True
        ]
    return out


@pytest.mark.parametrize("w", _cases("security"))
def test_security_context_meets_its_level_with_only_the_needed_privileges(w: Obj) -> None:
    assert check(w) == []


@pytest.mark.parametrize("w", _cases("resources"))
def test_every_container_has_requests_and_a_memory_limit(w: Obj) -> None:
    for c in containers(w):
        res = c.get("resources") or {}
        assert {"cpu", "memory"} <= set(res.get("requests") or {}), f"{ident(w)}/{c['name']}: requests"
        assert "memory" in (res.get("limits") or {}), f"{ident(w)}/{c['name']}: memory limit"


def _probe_target(probe: Obj, c: Obj) -> tuple[int | None, str | None]:
    http = probe.get("httpGet")
    if http is None:
        return None, None
    port = http["port"]
    if isinstance(port, str):
        port = next((p["containerPort"] for p in c.get("ports") or [] if p.get("name") == port), None)
    return port, http["path"]


@pytest.mark.parametrize("w", _cases("probes"))
def test_long_running_containers_have_probes_on_their_real_health_endpoints(w: Obj) -> None:
    for c in containers(w, init=False):
        if c["image"].split(":")[0] != SUITE_IMAGE:
            continue  # upstream CSI sidecars: the livenessprobe sidecar serves the driver's health
        assert c.get("livenessProbe") and c.get("readinessProbe"), f"{ident(w)}/{c['name']}: probes"
        if "/" in (c.get("command") or ["/"])[0]:
            continue  # OVS/OVN daemons: exec probes through their control sockets
        command: list[str] = [*c["command"], *(c.get("args") or [])]
        program, argv = command[0], command[1:]
        health = programs.health(program, programs.parse(program, argv, container_env(w, c)))
        if health is None:
            continue
        assert _probe_target(c["livenessProbe"], c) == (health.port, health.liveness), (
            f"{ident(w)}/{c['name']}"
        )
        assert _probe_target(c["readinessProbe"], c) == (health.port, health.readiness), (
            f"{ident(w)}/{c['name']}"
        )


def test_the_checks_refuse_what_they_should() -> None:
    restricted = Needs("restricted", "test")
    w = {"kind": "Deployment", "metadata": {"name": "x"}, "spec": {"template": {"spec": {
        "hostNetwork": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
        "containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
    }}}}  # fmt: skip
    found = " ".join(least_privilege_violations(w, restricted) + baseline_violations(w, restricted)
                     + restricted_violations(w))  # fmt: skip
    problems = (
        "hostNetwork",
        "hostPath",
        "net.core.somaxconn",
        "SYS_ADMIN",
        "drop ALL",
        "allowPrivilegeEscalation",
        "may run as root",
        "readOnlyRootFilesystem",
        "seccompProfile",
    )
    for problem in problems:
        assert problem in found
