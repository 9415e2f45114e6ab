"""PodSecurity's policy resolution, check registry and admission decisions (pure, no server), as
k8s.io/pod-security-admission decides them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.errors import Forbidden, Invalid
from nodeenv.kubeapi.kinds import KINDS
from nodeenv.kubeapi.podsecurity import registry
from nodeenv.kubeapi.podsecurity.admission import PodSecurityAdmission
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.podsecurity.levels import (
    ALL_PRIVILEGED,
    LATEST,
    LevelVersion,
    Policy,
    Version,
    policy_to_evaluate,
)
from nodeenv.kubeapi.settings import parse

P = "pod-security.kubernetes.io/"
KIND = {(k.group, k.kind): k for k in KINDS}
POD, NAMESPACE, DEPLOYMENT = KIND[("", "Pod")], KIND[("", "Namespace")], KIND[("apps", "Deployment")]
BASELINE = LevelVersion("baseline")


def pod(name: str = "p", image: str = "i", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": image}], **spec}}


def admission(
    labels: dict[str, str], pods: list[dict[str, Any]] | None = None, **config: Any
) -> PodSecurityAdmission:
    ns = {"metadata": {"name": "t", "labels": labels}}
    return PodSecurityAdmission(PodSecurityConfig(**config), lambda name: ns, lambda name: list(pods or []))


def test_labels_override_defaults_and_warn_follows_a_stricter_enforce() -> None:
    policy, errors = policy_to_evaluate(
        {P + "enforce": "restricted", P + "enforce-version": "v1.30"}, ALL_PRIVILEGED
    )
    assert errors == []
    assert policy.enforce == LevelVersion("restricted", Version(30)) == policy.warn
    assert policy.audit == LevelVersion("privileged", LATEST)


def test_invalid_labels_fail_closed_for_enforce_and_open_for_warn() -> None:
    policy, errors = policy_to_evaluate(
        {P + "enforce": "none", P + "warn": "x", P + "audit-version": "1.2"}, ALL_PRIVILEGED
    )
    assert policy.enforce.level == "restricted" and policy.warn.level == "privileged"
    assert errors == [
        (f"metadata.labels[{P}enforce]", "none", "must be one of privileged, baseline, restricted"),
        (f"metadata.labels[{P}audit-version]", "1.2", 'must be "latest" or "v1.x"'),
        (f"metadata.labels[{P}warn]", "x", "must be one of privileged, baseline, restricted"),
    ]


def test_restricted_overrides_its_baseline_counterparts_and_versions_gate_checks() -> None:
    ids = [cid for cid, _ in registry.checks_for(LevelVersion("restricted"))]
    assert "hostPathVolumes" not in ids and "restrictedVolumes" in ids and "capabilities_baseline" not in ids
    assert ids.index("windowsHostProcess") < ids.index("allowPrivilegeEscalation")  # baseline IDs first
    probe = pod(containers=[{"name": "c", "livenessProbe": {"httpGet": {"host": "h", "port": 1}}}])
    assert registry.evaluate(LevelVersion("baseline", Version(33)), probe["metadata"], probe["spec"]) == []
    assert (
        registry.evaluate(BASELINE, probe["metadata"], probe["spec"])[0].reason == "probe or lifecycle host"
    )
    assert [cid for cid, _ in registry.checks_for(LevelVersion("privileged"))] == []


def test_workload_templates_only_warn_and_audit() -> None:
    adm = admission({P + "enforce": "baseline", P + "warn": "baseline", P + "audit": "baseline"})
    template = pod(hostNetwork=True)
    out = adm.validate(
        DEPLOYMENT, "t", {"metadata": {"name": "d"}, "spec": {"template": template}}, None, "u", ""
    )
    assert out.error is None
    assert out.warnings == ['would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)']
    assert out.annotations == {"audit-violations": out.warnings[0]}
    refused = adm.validate(POD, "t", pod("x", hostNetwork=True), None, "u", "")
    assert isinstance(refused.error, Forbidden) and refused.warnings == []
    assert refused.annotations["enforce-policy"] == "baseline:latest"


def test_pod_updates_are_evaluated_only_when_an_image_or_the_containers_change() -> None:
    adm = admission({P + "enforce": "baseline"})
    old = pod(hostPID=True)
    assert (
        adm.validate(POD, "t", {**old, "metadata": {"name": "p", "labels": {"a": "b"}}}, old, "u", "").error
        is None
    )
    assert adm.validate(POD, "t", pod(image="j", hostPID=True), old, "u", "").error is not None
    assert adm.validate(POD, "t", pod(hostPID=True), None, "u", "status").error is None


def test_exemptions_and_the_fully_privileged_namespace() -> None:
    adm = admission(
        {P + "enforce": "baseline"}, usernames=frozenset({"ops"}), runtime_classes=frozenset({"kata"})
    )
    assert adm.validate(POD, "t", pod(hostPID=True), None, "ops", "").annotations == {"exempt": "user"}
    kata = adm.validate(POD, "t", pod(hostPID=True, runtimeClassName="kata"), None, "u", "")
    assert kata.error is None and kata.annotations == {"exempt": "runtimeClass"}
    free = admission({P + "enforce": "privileged", P + "enforce-version": "v1.20"})
    assert free.validate(POD, "t", pod(hostPID=True), None, "u", "").annotations == {
        "enforce-policy": "privileged:latest"
    }


def test_namespace_labels_are_validated_when_they_change() -> None:
    adm = admission({})
    bad = {"metadata": {"name": "t", "labels": {P + "enforce": "strict"}}}
    created = adm.validate(NAMESPACE, "", bad, None, "u", "")
    assert isinstance(created.error, Invalid)
    assert created.error.message == (
        f'Namespace "t" is invalid: metadata.labels[{P}enforce]: Invalid value: "strict": '
        "must be one of privileged, baseline, restricted"
    )
    relabelled = {"metadata": {"name": "t", "labels": {P + "enforce": "strict", "other": "x"}}}
    assert adm.validate(NAMESPACE, "", relabelled, bad, "u", "").error is None  # the same error as before


def test_a_stricter_enforce_level_names_the_existing_pods_that_violate_it() -> None:
    owner = [{"controller": True, "uid": "rs-1", "kind": "ReplicaSet", "name": "rs"}]
    pods = [pod("b", hostPID=True), pod("a", hostPID=True), pod("c"), pod("d", hostIPC=True)]
    pods[3]["metadata"]["ownerReferences"] = owner
    adm = admission({}, pods)
    old = {"metadata": {"name": "t", "labels": {P + "enforce": "privileged"}}}
    new = {"metadata": {"name": "t", "labels": {P + "enforce": "baseline"}}}
    assert adm.validate(NAMESPACE, "", new, old, "u", "").warnings == [
        'existing pods in namespace "t" violate the new PodSecurity enforce level "baseline:latest"',
        "a (and 2 other pods): host namespaces",
    ]
    relaxed = adm.validate(NAMESPACE, "", old, new, "u", "")
    assert relaxed.warnings == [] and relaxed.error is None


def test_an_exempt_namespace_with_its_own_policy_is_warned_about() -> None:
    adm = admission({}, namespaces=frozenset({"t"}))
    ns = {"metadata": {"name": "t", "labels": {P + "enforce": "baseline"}}}
    assert adm.validate(NAMESPACE, "", ns, None, "u", "").warnings == [
        'namespace "t" is exempt from Pod Security, and the policy (enforce=baseline:latest) will be ignored'
    ]
    assert adm.validate(POD, "t", pod(hostPID=True), None, "u", "").annotations == {"exempt": "namespace"}


def test_config_from_an_admission_configuration_file_and_its_path(tmp_path: Path) -> None:
    (tmp_path / "psa.yaml").write_text(
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\n"
        "defaults: {enforce: baseline, warn: restricted}\nexemptions: {usernames: [ops]}\n"
    )
    (tmp_path / "admission.yaml").write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
        "plugins: [{name: PodSecurity, path: psa.yaml}]\n"
    )
    config = PodSecurityConfig.load(tmp_path / "admission.yaml")
    assert config.defaults == Policy(BASELINE, LevelVersion("privileged"), LevelVersion("restricted"))
    assert config.usernames == {"ops"}
    (tmp_path / "psa.yaml").write_text("kind: PodSecurityConfiguration\ndefaults: {enforce: strict}\n")
    with pytest.raises(ValueError, match=r"defaults\.enforce"):
        PodSecurityConfig.load(tmp_path / "admission.yaml")


def test_the_daemons_flag_and_its_env_fallback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k3s = Path(__file__).parents[3] / "daemonsets" / "k3s" / "pod-security.yaml"
    flag = parse(["--dir", "/tmp/x", "--admission-control-config-file", str(k3s)], {})
    assert flag.config.pod_security.defaults.enforce == BASELINE
    env = parse(["--dir", "/tmp/x"], {"KUBEAPI_ADMISSION_CONTROL_CONFIG_FILE": str(k3s)})
    assert env.config.pod_security == flag.config.pod_security
    assert parse(["--dir", "/tmp/x"], {}).config.pod_security == PodSecurityConfig()
    with pytest.raises(SystemExit):
        parse(["--dir", "/tmp/x", "--admission-control-config-file", str(tmp_path / "none.yaml")], {})
    assert "--admission-control-config-file" in capsys.readouterr().err
