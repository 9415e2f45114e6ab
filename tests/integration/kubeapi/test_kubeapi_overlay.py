"""A cluster admin's path against the API double with kubectl 1.32 and its defaults (client-side
validation `strict`, which asks the server to validate through /openapi/v3): the external-snapshotter
CRDs first, then `kubectl apply -k daemonsets/overlays/k3s`, then `kubectl get`. Custom resources
through kubectl: printer columns, merge patch, the 415 for a strategic merge patch, gone with their
CRD."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from nodeenv.kubeapi.snapshot_crds import snapshot_crds
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_json
from tests.kubeapi_fixture import KubeApiHandle

OVERLAY = Path(__file__).parents[3] / "daemonsets" / "overlays" / "k3s"


def install_crds(api: KubeApiHandle, tmp_path: Path) -> None:
    f = tmp_path / "snapshot-crds.yaml"
    f.write_text(yaml.safe_dump_all(snapshot_crds()))
    out = kubectl(api, "apply", "-f", str(f))
    assert out.count("customresourcedefinition.apiextensions.k8s.io/") == 4 and "created" in out


def rendered(api: KubeApiHandle) -> list[dict[str, object]]:
    return [o for o in yaml.safe_load_all(kubectl(api, "kustomize", str(OVERLAY))) if o]


def test_apply_k_overlay_with_default_validation(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    install_crds(kube_api, tmp_path)
    objects = rendered(kube_api)
    out = kubectl(kube_api, "apply", "-k", str(OVERLAY))  # fails the test on a non-zero exit
    assert "namespace/kube-system configured" in out  # its Pod Security labels on the existing namespace
    assert out.count(" created") == len(objects) - 1, out
    creates = [r for r in kube_api.requests if r.verb == "create" and r.path.startswith("/api")]
    assert {r.status for r in creates} == {201} and len(creates) >= len(objects)
    assert all("fieldValidation=Strict" in r.query for r in creates)  # the server validated each
    paths = {r.path for r in kube_api.state.recorder.nonresource}
    # every kind was in the v3 documents; /openapi/v2 is read only for the strategic merge patch of the
    # existing kube-system Namespace (kubectl 1.32 computes patches from v2 unless KUBECTL_OPENAPIV3_PATCH)
    assert "/openapi/v3" in paths

    want = sorted(
        f"{o['kind']}.apps/{o['metadata']['name']}".lower()  # type: ignore[index]
        for o in objects if o["kind"] in ("DaemonSet", "Deployment", "StatefulSet")
    )  # fmt: skip
    got = kubectl(
        kube_api, "get", "daemonsets,deployments,statefulsets", "-n", "kube-system", "-o", "name"
    ).split()
    assert sorted(got) == want and len(want) == 11
    sts = kubectl_json(kube_api, "get", "statefulset", "ovn-central", "-n", "kube-system")
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["serviceName"] == "ovn-central"
    table = kubectl(kube_api, "get", "daemonsets", "-n", "kube-system").splitlines()
    assert table[0].split()[:6] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE"]
    assert "node-role.kubernetes.io/control-plane=true" in next(r for r in table if "iam-webhook" in r)

    again = kubectl(kube_api, "apply", "-k", str(OVERLAY))
    # A PodDisruptionBudget's selector has patchStrategy "replace": kubectl's three-way patch always
    # carries it, so a PDB reads "configured" on every apply, against kube-apiserver too.
    pdbs = sum(1 for o in objects if o["kind"] == "PodDisruptionBudget")
    assert pdbs == 7 and again.count("poddisruptionbudget.policy/") == pdbs, again
    assert again.count(" unchanged") == len(objects) - pdbs, again
    ds = kubectl_json(kube_api, "get", "ds", "prismnet-agent", "-n", "kube-system")
    assert ds["metadata"]["generation"] == 1 and ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert kubectl(kube_api, "get", "vsclass", "-o", "name").strip() == (
        "volumesnapshotclass.snapshot.storage.k8s.io/lightningstor-snapshots"
    )


def test_custom_resources_through_kubectl(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    install_crds(kube_api, tmp_path)
    f = tmp_path / "vsclass.yaml"
    f.write_text(
        "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: {name: snaps}\n"
        "driver: stor.plasmacloud.io\ndeletionPolicy: Delete\n"
    )
    kubectl(kube_api, "apply", "-f", str(f))
    table = kubectl(kube_api, "get", "vsclass").splitlines()
    assert table[0].split() == ["NAME", "DRIVER", "DELETIONPOLICY", "AGE"]
    assert table[1].split()[:3] == ["snaps", "stor.plasmacloud.io", "Delete"]
    kubectl(kube_api, "patch", "vsclass", "snaps", "--type=merge", "-p", '{"deletionPolicy":"Retain"}')
    assert kubectl_json(kube_api, "get", "vsclass", "snaps")["deletionPolicy"] == "Retain"
    refused = kubectl(kube_api, "patch", "vsclass", "snaps", "-p", '{"driver":"x"}', check=False)
    assert "application/strategic-merge-patch+json is not supported" in refused
    bad = f.read_text().replace("Delete", "Keep").replace("{name: snaps}", "{name: bad}")
    f.write_text(bad)
    out = kubectl(kube_api, "apply", "-f", str(f), check=False)
    assert 'Unsupported value: "Keep": supported values: "Delete", "Retain"' in out
    f.write_text(bad.replace("Keep", "Delete") + "unknownField: 1\n")
    out = kubectl(kube_api, "apply", "-f", str(f), check=False)  # kubectl's default: Strict
    assert 'strict decoding error: unknown field "unknownField"' in out
    kubectl(kube_api, "delete", "crd", "volumesnapshotclasses.snapshot.storage.k8s.io")
    gone = kubectl(kube_api, "get", "vsclass", check=False)  # from kubectl's discovery cache, then 404
    assert "NotFound" in gone or "the server doesn't have a resource type" in gone
    assert kubectl(kube_api, "get", "volumesnapshots", "-A", check=False).startswith("No resources found")
    kubectl(kube_api, "delete", "crd", "volumesnapshots.snapshot.storage.k8s.io",
            "volumesnapshotcontents.snapshot.storage.k8s.io")  # fmt: skip
    groups = json.loads(kubectl(kube_api, "get", "--raw", "/apis"))["groups"]
    assert "snapshot.storage.k8s.io" not in [g["name"] for g in groups]


def test_overlay_before_the_crds_is_refused_as_kube_apiserver_does(
    kube_api: KubeApiHandle, tmp_path: Path
) -> None:
    """kubectl finds the snapshot kinds in neither /openapi/v3 nor the protobuf /openapi/v2 and not as
    CRDs, so its REST mapping names them: the message an admin gets from a real cluster."""
    out = kubectl(kube_api, "apply", "-k", str(OVERLAY), check=False)
    assert 'no matches for kind "VolumeSnapshotClass" in version "snapshot.storage.k8s.io/v1"' in out
    assert (
        'no matches for kind "VolumeGroupSnapshotClass"' in out and "ensure CRDs are installed first" in out
    )
    assert "proto:" not in out and "daemonset.apps/prismnet-agent created" in out
    v2 = [r for r in kube_api.state.recorder.nonresource if r.path == "/openapi/v2"]
    assert v2 and {r.status for r in v2} == {200}
    install_crds(kube_api, tmp_path)
    again = kubectl(kube_api, "apply", "-k", str(OVERLAY))
    assert "volumesnapshotclass.snapshot.storage.k8s.io/lightningstor-snapshots created" in again
