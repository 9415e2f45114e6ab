"""The Pod Security levels the install sets: the k3s admission configuration (the spec's Baseline
by default), and the suite's own namespace at exactly the level its workloads need, checked with the
API double's PodSecurity checks (the ones kube-apiserver runs)."""

from __future__ import annotations

from nodeenv.kubeapi.podsecurity import registry
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.podsecurity.levels import LATEST, LevelVersion, Policy, policy_to_evaluate
from tests.unit.daemonsets.rendered import K3S, find, k3s_file, pod_spec, workloads
from tests.unit.daemonsets.test_k3s_config import apiserver_args, server
from tests.unit.daemonsets.test_pod_security import NEEDS

HOST_PATH = "/etc/k8shost/pod-security.yaml"


def test_k3s_enforces_baseline_and_warns_and_audits_restricted_by_default() -> None:
    assert apiserver_args(server())["admission-control-config-file"] == HOST_PATH
    config = PodSecurityConfig.load(K3S / "pod-security.yaml")
    baseline, restricted = LevelVersion("baseline", LATEST), LevelVersion("restricted", LATEST)
    assert config == PodSecurityConfig(defaults=Policy(enforce=baseline, audit=restricted, warn=restricted))
    assert k3s_file("pod-security.yaml")["plugins"][0]["name"] == "PodSecurity"


def _least_level(w: dict[str, object]) -> str:
    meta, spec = (w["spec"]["template"].get("metadata") or {}), pod_spec(w)  # type: ignore[index]
    for level in ("restricted", "baseline"):
        if not registry.evaluate(LevelVersion(level), meta, spec):  # type: ignore[arg-type]
            return level
    return "privileged"


def test_the_suites_namespace_is_exactly_as_privileged_as_its_workloads_need() -> None:
    ns = find("Namespace", "kube-system")
    defaults = PodSecurityConfig.load(K3S / "pod-security.yaml").defaults
    policy, errors = policy_to_evaluate(ns["metadata"]["labels"], defaults)
    assert errors == []
    least = {w["metadata"]["name"]: _least_level(w) for w in workloads()}
    assert policy.enforce.level == "privileged" and "privileged" in least.values()
    # the level each workload's table entry names is the one the admission checks find
    assert {n: lv for n, lv in least.items() if lv == "restricted"} == {
        n: "restricted" for n, needs in NEEDS.items() if needs.level == "restricted"
    }
