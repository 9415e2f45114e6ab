"""boot's wait for StatefulSet members (nodeenv/kubelet/boot.py::members_due)."""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet.boot import members_due

STS = [{"metadata": {"name": "ovn-central", "namespace": "kube-system"}, "spec": {"replicas": 3}}]


def member(i: int, node: str = "", unschedulable: bool = False) -> dict[str, Any]:
    status = (
        {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        if unschedulable
        else {}
    )
    return {
        "metadata": {
            "name": f"ovn-central-{i}",
            "namespace": "kube-system",
            "ownerReferences": [{"kind": "StatefulSet", "name": "ovn-central"}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


def test_a_member_created_but_not_scheduled_yet_is_still_due() -> None:
    pods = [member(0, "node2"), member(1, "node3"), member(2)]
    assert members_due(STS, pods) == ["kube-system/ovn-central"]


def test_a_missing_member_is_due_and_an_unschedulable_one_ends_the_wait() -> None:
    assert members_due(STS, [member(0, "node2"), member(1, "node3")]) == ["kube-system/ovn-central"]
    assert members_due(STS, [member(0, "node2"), member(1, "node3"), member(2, unschedulable=True)]) == []
    assert members_due(STS, [member(0, "node2"), member(1, "node3"), member(2, "node1")]) == []
