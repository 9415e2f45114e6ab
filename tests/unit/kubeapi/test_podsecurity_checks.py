"""Each Pod Security Standards check on its own (pure functions), with the reason and detail
kube-apiserver's PodSecurity plugin prints (k8s.io/pod-security-admission/policy/check_*.go)."""

from __future__ import annotations

from typing import Any

import pytest

from nodeenv.kubeapi.podsecurity import baseline as b
from nodeenv.kubeapi.podsecurity import restricted as r
from nodeenv.kubeapi.podsecurity.spec import Violation


def spec(*containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"containers": list(containers) or [{"name": "c", "image": "i"}], **fields}


def ctr(name: str = "c", **sc: Any) -> dict[str, Any]:
    return {"name": name, "image": "i", **({"securityContext": sc} if sc else {})}


def test_privileged_names_every_privileged_container_init_first() -> None:
    s = spec(
        ctr("a", privileged=True), ctr("b", privileged=False), initContainers=[ctr("i", privileged=True)]
    )
    assert b.privileged({}, s) == Violation(
        "privileged", 'containers "i", "a" must not set securityContext.privileged=true'
    )
    assert b.privileged({}, spec(ctr("a", privileged=False))) is None


def test_host_process_pod_and_containers() -> None:
    s = spec(
        ctr("a", windowsOptions={"hostProcess": True}),
        securityContext={"windowsOptions": {"hostProcess": True}},
    )
    assert b.host_process({}, s) == Violation(
        "hostProcess", 'pod and container "a" must not set securityContext.windowsOptions.hostProcess=true'
    )


def test_host_namespaces() -> None:
    assert b.host_namespaces({}, spec(hostNetwork=True, hostIPC=True)) == Violation(
        "host namespaces", "hostNetwork=true, hostIPC=true"
    )
    assert b.host_namespaces({}, spec(hostPID=False)) is None


def test_host_path_volumes() -> None:
    s = spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}},
                      {"name": "run", "hostPath": {"path": "/run"}}])  # fmt: skip
    assert b.host_path_volumes({}, s) == Violation("hostPath volumes", 'volumes "root", "run"')


def test_host_ports_sorted_as_text() -> None:
    s = spec({"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9}]},
             {"name": "b", "ports": [{"containerPort": 90, "hostPort": 90, "protocol": "UDP"}]})  # fmt: skip
    assert b.host_ports({}, s) == Violation("hostPort", 'containers "a", "b" use hostPorts 8080, 90')
    one = spec({"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}]})
    assert b.host_ports({}, one) == Violation("hostPort", 'container "a" uses hostPort 80')


def test_probe_and_lifecycle_hosts() -> None:
    c = {"name": "a", "livenessProbe": {"httpGet": {"port": 80, "host": "10.0.0.1"}},
         "lifecycle": {"preStop": {"tcpSocket": {"port": 1, "host": "metadata"}}}}  # fmt: skip
    assert b.host_probes_and_lifecycle({}, spec(c)) == Violation(
        "probe or lifecycle host", 'container "a" uses probe or lifecycle hosts "10.0.0.1", "metadata"'
    )
    assert (
        b.host_probes_and_lifecycle({}, spec({"name": "a", "readinessProbe": {"httpGet": {"host": ""}}}))
        is None
    )


def test_baseline_capabilities_beyond_the_default_set() -> None:
    s = spec(
        ctr("a", capabilities={"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}),
        ctr("b", capabilities={"add": ["KILL"]}),
    )
    assert b.capabilities({}, s) == Violation(
        "non-default capabilities",
        'container "a" must not include "NET_ADMIN", "SYS_ADMIN" in securityContext.capabilities.add',
    )


def test_app_armor_fields_and_annotations() -> None:
    s = spec(
        ctr("a", appArmorProfile={"type": "Unconfined"}),
        securityContext={"appArmorProfile": {"type": "Localhost"}},
    )
    meta = {"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "unconfined"}}
    assert b.app_armor(meta, s) == Violation(
        "forbidden AppArmor profiles",
        'container "a" and annotation must not set AppArmor profile type to '
        '"Unconfined", "container.apparmor.security.beta.kubernetes.io/a="unconfined""',
    )
    ok = {"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "localhost/p"}}
    assert b.app_armor(ok, spec()) is None


def test_selinux_type_user_role() -> None:
    s = spec(
        ctr("a", seLinuxOptions={"type": "spc_t", "user": "root"}),
        securityContext={"seLinuxOptions": {"role": "r"}},
    )
    assert b.selinux_1_31({}, s) == Violation(
        "seLinuxOptions",
        'pod and container "a" set forbidden securityContext.seLinuxOptions: type "spc_t"; '
        "user may not be set; role may not be set",
    )
    engine = spec(ctr("a", seLinuxOptions={"type": "container_engine_t"}))
    assert b.selinux_1_31({}, engine) is None
    assert b.selinux_1_0({}, engine) is not None


def test_proc_mount_and_user_namespaces() -> None:
    s = spec(ctr("a", procMount="Unmasked"), ctr("b", procMount="Default"))
    want = Violation("procMount", 'container "a" must not set securityContext.procMount to "Unmasked"')
    assert b.proc_mount_1_0({}, s) == want
    assert b.proc_mount_1_35({}, {**s, "hostUsers": False}) is None
    assert r.proc_mount({}, {**s, "hostUsers": False}) == want


def test_baseline_seccomp_field_and_old_annotations() -> None:
    s = spec(
        ctr("a", seccompProfile={"type": "Unconfined"}),
        securityContext={"seccompProfile": {"type": "RuntimeDefault"}},
    )
    assert b.seccomp_1_19({}, s) == Violation(
        "seccompProfile", 'container "a" must not set securityContext.seccompProfile.type to "Unconfined"'
    )
    meta = {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}
    assert b.seccomp_annotations_1_0(meta, spec()) == Violation(
        "seccompProfile", 'forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"'
    )


def test_sysctls_by_version() -> None:
    s = spec(securityContext={"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "1"},
                                          {"name": "kernel.msgmax", "value": "1"}]})  # fmt: skip
    assert b.sysctls_1_32({}, s) == Violation("forbidden sysctls", "kernel.msgmax")
    assert b.sysctls_1_29({}, s) == Violation("forbidden sysctls", "net.ipv4.tcp_rmem, kernel.msgmax")


def test_restricted_volume_types() -> None:
    vols = [{"name": "a", "hostPath": {"path": "/"}}, {"name": "b", "nfs": {"server": "x"}},
            {"name": "c", "csi": {"driver": "d"}}, {"name": "d", "projected": {"sources": []}}]  # fmt: skip
    s = spec(volumes=vols)
    assert r.volumes({}, s) == Violation(
        "restricted volume types", 'volumes "a", "b" use restricted volume types "hostPath", "nfs"'
    )


def test_allow_privilege_escalation_and_windows() -> None:
    s = spec(ctr("a"), ctr("b", allowPrivilegeEscalation=False), ctr("c", allowPrivilegeEscalation=True))
    assert r.privilege_escalation_1_25({}, s) == Violation(
        "allowPrivilegeEscalation != false",
        'containers "a", "c" must set securityContext.allowPrivilegeEscalation=false',
    )
    assert r.privilege_escalation_1_25({}, {**s, "os": {"name": "windows"}}) is None


def test_restricted_capabilities_drop_all_and_add_only_net_bind_service() -> None:
    s = spec(ctr("a"), ctr("b", capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "NET_RAW"]}))
    assert r.capabilities_1_25({}, s) == Violation(
        "unrestricted capabilities",
        'container "a" must set securityContext.capabilities.drop=["ALL"]; '
        'container "b" must not include "NET_RAW" in securityContext.capabilities.add',
    )


@pytest.mark.parametrize(
    ("pod_sc", "containers", "detail"),
    [
        ({}, [ctr("a"), ctr("b", runAsNonRoot=True)],
         'pod or container "a" must set securityContext.runAsNonRoot=true'),
        ({"runAsNonRoot": True}, [ctr("a")], None),
        ({"runAsNonRoot": False}, [ctr("a", runAsNonRoot=False)],
         'pod and container "a" must not set securityContext.runAsNonRoot=false'),
    ],
)  # fmt: skip
def test_run_as_non_root(
    pod_sc: dict[str, Any], containers: list[dict[str, Any]], detail: str | None
) -> None:
    got = r.run_as_non_root_1_35({}, spec(*containers, securityContext=pod_sc))
    assert got == (Violation("runAsNonRoot != true", detail) if detail else None)


def test_run_as_user_zero_and_user_namespaces() -> None:
    s = spec(ctr("a", runAsUser=0), ctr("b", runAsUser=1000), securityContext={"runAsUser": 0})
    assert r.run_as_user_1_35({}, s) == Violation(
        "runAsUser=0", 'pod and container "a" must not set runAsUser=0'
    )
    assert r.run_as_user_1_35({}, {**s, "hostUsers": False}) is None
    assert r.run_as_user_1_23({}, {**s, "hostUsers": False}) is not None


def test_restricted_seccomp_must_be_set() -> None:
    assert r.seccomp_1_25({}, spec(ctr("a"))) == Violation(
        "seccompProfile",
        'pod or container "a" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost"',
    )
    assert (
        r.seccomp_1_25({}, spec(ctr("a"), securityContext={"seccompProfile": {"type": "Localhost"}})) is None
    )
    bad = spec(ctr("a", seccompProfile={"type": "Unconfined"}))
    assert r.seccomp_1_25({}, bad) == Violation(
        "seccompProfile", 'container "a" must not set securityContext.seccompProfile.type to "Unconfined"'
    )
