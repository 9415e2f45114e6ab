"""`kubectl kustomize daemonsets/overlays/k3s` renders with the kubectl on this machine, every object
carries the common labels, and the suite's image is named with one tag set in one place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.daemonsets.rendered import (
    DS,
    OVERLAY,
    SUITE_IMAGE,
    containers,
    ident,
    objects,
    suite_containers,
    workloads,
)


def test_overlay_renders_every_component() -> None:
    names = {ident(o) for o in objects()}
    for expected in (
        "StatefulSet/kube-system/ovn-central",
        "Service/kube-system/ovn-central",
        "DaemonSet/kube-system/ovs-node",
        "DaemonSet/kube-system/prismnet-agent",
        "Deployment/kube-system/lightningstor-csi-controller",
        "DaemonSet/kube-system/lightningstor-csi-node",
        "CSIDriver/stor.plasmacloud.io",
        "DaemonSet/kube-system/iam-webhook",
        "Deployment/kube-system/fiberlb-controller",
        "Deployment/kube-system/flashdns-controller",
        "Deployment/kube-system/netpol-controller",
        "Deployment/kube-system/node-controller",
        "Deployment/kube-system/project-controller",
        "Service/kube-system/cluster-dns",
        "ClusterRole/plasmacloud-cluster-admin",
    ):
        assert expected in names


def test_no_object_is_rendered_twice() -> None:
    names = [ident(o) for o in objects()]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_every_object_and_pod_template_carries_the_common_labels() -> None:
    for o in objects():
        assert o["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "k8shost", ident(o)
    for w in workloads():
        labels = w["spec"]["template"]["metadata"]["labels"]
        assert labels.get("app.kubernetes.io/part-of") == "k8shost", ident(w)
        assert labels.get("app.kubernetes.io/name"), f"{ident(w)}: pods need app.kubernetes.io/name"
        assert w["spec"]["selector"]["matchLabels"].items() <= labels.items(), ident(w)


def test_suite_image_has_one_tag_set_only_in_the_overlay() -> None:
    images = {c["image"] for _, c in suite_containers()}
    assert len(images) == 1, images
    (image,) = images
    assert re.fullmatch(re.escape(SUITE_IMAGE) + r":\d+\.\d+\.\d+", image), image
    tag = image.split(":")[1]
    holders = [p for p in DS.rglob("*.yaml") if SUITE_IMAGE in p.read_text() or f'"{tag}"' in p.read_text()]
    assert holders == [OVERLAY / "kustomization.yaml"], "the image tag must be set in one place"


def test_every_container_image_is_the_suite_or_a_pinned_upstream_image() -> None:
    for w in workloads():
        for c in containers(w):
            image = c["image"]
            assert image != "k8shost", f"{ident(w)}/{c['name']}: the k8shost image name was not mapped"
            assert re.search(r":v?\d+\.\d+\.\d+$", image), f"{ident(w)}/{c['name']}: unpinned {image}"


@pytest.mark.parametrize(
    "kdir", sorted(p.parent for p in DS.rglob("kustomization.yaml")), ids=lambda p: str(p.relative_to(DS))
)
def test_every_kustomization_renders_on_its_own(kdir: Path) -> None:
    """Each component folder is also applied alone (docs/components/csi.md: `kubectl apply -k
    daemonsets/csi`)."""
    assert objects(kdir)
