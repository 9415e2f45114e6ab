"""StatefulSets: each governing Service exists, is headless and selects the set's pods (without it no
member has its stable DNS name); ovn-central's RAFT members agree with it: one member per node, every
member's client and RAFT ports the same in its args, its container ports and the Service, the script's
peer loop covering every ordinal, each readiness probe asking its own database's cluster status."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.daemonsets.rendered import find, objects, pod_spec

STATEFULSETS = [o for o in objects() if o["kind"] == "StatefulSet"]


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("sts", STATEFULSETS, ids=lambda s: s["metadata"]["name"])
def test_the_governing_service_is_headless_and_selects_the_members(sts: dict[str, Any]) -> None:
    ns, name = sts["metadata"]["namespace"], sts["spec"].get("serviceName")
    assert name, f"{sts['metadata']['name']}: no serviceName, so no stable DNS names"
    svc = next((o for o in objects() if o["kind"] == "Service" and o["metadata"]["name"] == name
                and o["metadata"].get("namespace") == ns), None)  # fmt: skip
    assert svc is not None, f"{sts['metadata']['name']}: serviceName {name} names no Service in {ns}"
    assert svc["spec"].get("clusterIP") == "None", f"Service {name} is not headless"
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert _labels_match(svc["spec"]["selector"], labels), f"Service {name} does not select the members"


def test_ovn_central_members_agree_on_ports_ordinals_and_probes() -> None:
    sts = find("StatefulSet", "ovn-central")
    spec = pod_spec(sts)
    replicas = sts["spec"]["replicas"]
    assert replicas == 3
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["topologyKey"] for t in anti] == ["kubernetes.io/hostname"]  # one member per node
    svc_ports = {p["name"]: p["port"] for p in find("Service", "ovn-central")["spec"]["ports"]}
    containers = {c["name"]: c for c in spec["containers"]}
    for db, name in (("nb", "OVN_Northbound"), ("sb", "OVN_Southbound")):
        c = containers[db]
        arg_db, client, raft = c["args"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert arg_db == db and (int(client), int(raft)) == (ports[db], ports[f"{db}-raft"])
        assert (svc_ports[db], svc_ports[f"{db}-raft"]) == (ports[db], ports[f"{db}-raft"])
        script = c["command"][2]
        assert f"for i in {' '.join(str(i) for i in range(replicas))}; do" in script, (
            "peers: not every ordinal"
        )
        assert '--remote="pssl:$client:$POD_IP"' in script, "the client listener is not on the command line"
        assert "ptcp:" not in script and "tcp:$" not in script, "clients and RAFT peers over TLS only"
        for flag in ("--private-key=", "--certificate=", "--ca-cert="):
            assert f"{flag}/etc/ovn/tls/" in script, flag
        probe = " ".join(c["readinessProbe"]["exec"]["command"])
        assert f"ovn{db}_db.ctl cluster/status {name}" in probe
