"""Issue 31 item 6 (RBAC): no platform service account but the node runtime may write Leases in
kube-node-lease (a Node's heartbeat: a forged one keeps a dead node Ready, a withheld one evicts a
live node's pods). Every Lease grant in the rendered overlay is confined to kube-system."""

from __future__ import annotations

from tests import rbac_coverage as rc


def test_every_lease_grant_of_the_overlay_is_in_kube_system() -> None:
    leases = {
        (account, g.scope, g.verb)
        for account in rc.defined_accounts()
        for g in rc.grants(account)
        if g.resource in ("leases", "*") and g.group in ("coordination.k8s.io", "*")
    }
    assert leases, "the controllers' leader election needs Lease grants"
    assert {(a, s) for a, s, _ in leases if s != "kube-system"} == set()


def test_the_csi_controller_keeps_its_sidecars_leader_election_in_kube_system() -> None:
    sa = "system:serviceaccount:kube-system:lightningstor-csi-controller"
    mine = {g.verb for g in rc.grants(sa) if g.resource == "leases" and g.scope == "kube-system"}
    assert {"get", "create", "update"} <= mine
