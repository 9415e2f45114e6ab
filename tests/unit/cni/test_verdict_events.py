"""Drops as PolicyDenied Events in the judged namespace, on the API double, through the machinery's
EventRecorder (one Event per policy, repeats as its series)."""

from __future__ import annotations

import dataclasses
from typing import Any

from cni.acl_log import parse_line
from cni.verdict_events import REASON, DropEvents
from controllers.machinery.kinds import NAMESPACES
from tests.unit.cni.test_verdicts import TCP, UDP


async def test_drops_become_one_event_per_policy_with_a_series(kube_api: Any) -> None:
    drop = parse_line(TCP)
    allow = parse_line(UDP)
    assert drop is not None and allow is not None
    np_drop = dataclasses.replace(drop, kind="np", policy="web-in", acl="np/t1/web-in")
    anp_drop = dataclasses.replace(drop, kind="anp", namespace="", policy="deny-all", acl="anp//deny-all")
    events = await DropEvents.connect(str(kube_api.kubeconfig), "node1")
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t1"}}
    await events.recorder.client.create(NAMESPACES, ns)
    try:
        for v in (drop, drop, drop, np_drop, allow, anp_drop):
            await events.record(v)
    finally:
        await events.close()
    # stored as core/v1 (what `kubectl get events -n t1` lists)
    got = sorted(kube_api.objects("events", namespace="t1"), key=lambda e: e["involvedObject"]["kind"])
    assert [
        (e["reason"], e["type"], e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in got
    ] == [
        (REASON, "Warning", "Namespace", "t1"),  # the namespace's default deny
        (REASON, "Warning", "NetworkPolicy", "web-in"),
    ]
    assert got[0]["series"]["count"] == 3  # the repeats: one Event, counted
    assert "tcp 10.244.1.5:40112 -> 10.244.2.7:8080 (ingress)" in got[0]["message"]
    assert (
        kube_api.objects("events", namespace=None) == got
        or len(kube_api.objects("events", namespace=None)) == 2
    )
