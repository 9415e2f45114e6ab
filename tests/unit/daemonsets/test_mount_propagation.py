"""Mount propagation as a node applies it. A container's Bidirectional mount is shared with the node:
any mount made below it inside the container -- by the container or by the runtime setting up the
container's other volume mounts -- propagates back to the node. A volumeMount nested inside a
Bidirectional mount of the same container is therefore mounted once more on the node at every start
of the container and never unmounted (the runner's boot of lightningstor-csi-node found this: its
plugin-dir inside the Bidirectional /var/lib/kubelet; kubevirt/kubevirt#17488 saw nodes go unusable
after a dozen restarts). A path a Bidirectional mount already holds is reached through it."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.unit.daemonsets.rendered import containers, ident, workloads

Obj = dict[str, Any]


def nested_in_bidirectional(container: Obj) -> list[tuple[str, str]]:
    """(nested mountPath, Bidirectional mountPath holding it) of the container's volumeMounts."""
    mounts = container.get("volumeMounts") or []
    shared = [m["mountPath"] for m in mounts if m.get("mountPropagation") == "Bidirectional"]
    return [
        (m["mountPath"], outer)
        for m in mounts
        for outer in shared
        if m["mountPath"] != outer and PurePosixPath(m["mountPath"]).is_relative_to(outer)
    ]


def test_no_mount_nested_inside_a_bidirectional_mount() -> None:
    found = [f"{ident(w)}/{c['name']}: {inner} inside Bidirectional {outer}"
             for w in workloads() for c in containers(w)
             for inner, outer in nested_in_bidirectional(c)]  # fmt: skip
    assert not found, "mounts that would pile up on the node at every container start: " + "; ".join(found)


@pytest.mark.parametrize(
    ("mounts", "nested"),
    [
        ([{"mountPath": "/var/lib/kubelet", "mountPropagation": "Bidirectional"},
          {"mountPath": "/var/lib/kubelet/plugins/x"}], [("/var/lib/kubelet/plugins/x", "/var/lib/kubelet")]),
        ([{"mountPath": "/var/lib/kubelet", "mountPropagation": "HostToContainer"},
          {"mountPath": "/var/lib/kubelet/plugins/x"}], []),
        ([{"mountPath": "/var/lib/kubelet", "mountPropagation": "Bidirectional"},
          {"mountPath": "/var/lib/kubeletx"}, {"mountPath": "/csi"}], []),
    ],
)  # fmt: skip
def test_the_check_tells_nested_from_sibling(mounts: list[Obj], nested: list[tuple[str, str]]) -> None:
    assert nested_in_bidirectional({"volumeMounts": mounts}) == nested
