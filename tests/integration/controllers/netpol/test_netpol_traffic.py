"""NetworkPolicies translated and applied to the real OVN, checked with real TCP/UDP between pod netns.

Each case asserts allowed (the echo came back) or refused (nothing within 0.5 s). One module
shares the pods; each policy set is applied once and `ovn-nbctl --wait=hv sync` waits until
ovn-controller has it before the probes run.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import pytest
from ovsdbapp.backend.ovs_idl.idlutils import RowNotFound

from controllers.netpol.ovn_apply import ApplyStats, NameTaken, PolicyNorthbound
from controllers.netpol.policy import NetworkPolicy, parse_policy
from controllers.netpol.translate import Desired, policy_group, translate
from controllers.projects.template import ProjectTemplate, desired_objects
from tests.integration.controllers.netpol.conftest import Cluster
from tests.integration.controllers.netpol.traffic import reaches

pytestmark = [pytest.mark.root, pytest.mark.ovn]


def np(ns: str, name: str, **spec: Any) -> NetworkPolicy:
    return parse_policy({"metadata": {"namespace": ns, "name": name}, "spec": spec})


def apply(c: Cluster, *policies: NetworkPolicy, nb: PolicyNorthbound | None = None) -> None:
    desired, skipped = translate(policies, c.members(), c.namespaces, c.node_ips())
    assert skipped == {}
    (nb or c.nb).apply(desired)
    c.sync()


def check(c: Cluster, cases: list[tuple[str | None, str, str, int, bool]]) -> None:
    got = []
    for src, dst, proto, port, want in cases:
        netns = None if src is None else c.pods[src].netns
        # refused: one probe; allowed: up to 3 (a loaded 2-core machine may drop one echo)
        tries = (reaches(netns, c.pods[dst].ip, proto, port) for _ in range(3 if want else 1))
        got.append(any(tries))
    want = [case[4] for case in cases]
    wrong = [f"{s or 'node'} -> {d} {p}/{n}: {'allowed' if g else 'refused'}"
             for (s, d, p, n, _), g, w in zip(cases, got, want, strict=True) if g != w]  # fmt: skip
    assert not wrong, wrong


A_WEB, A_FE, B_FE, B_DB = "np-a/web", "np-a/fe", "np-b/fe", "np-b/db"
INGRESS = np(
    "np-a", "web-in",
    podSelector={"matchLabels": {"app": "web"}},
    ingress=[
        {"from": [{"podSelector": {"matchLabels": {"app": "fe"}}}], "ports": [{"port": 8080}]},
        {"from": [{"namespaceSelector": {"matchLabels": {"team": "b"}},
                   "podSelector": {"matchLabels": {"app": "fe"}}}],
         "ports": [{"protocol": "UDP", "port": 5353}]},
    ],
)  # fmt: skip


def egress(cidr: str, except_: str) -> NetworkPolicy:
    return np(
        "np-b", "fe-out",
        podSelector={"matchLabels": {"app": "fe"}},
        policyTypes=["Egress"],
        egress=[
            {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "np-a"}}}],
             "ports": [{"port": "http"}]},
            {"to": [{"ipBlock": {"cidr": cidr, "except": [except_]}}],
             "ports": [{"protocol": "UDP", "port": 5000, "endPort": 6000}]},
        ],
    )  # fmt: skip


def test_ingress_pod_and_namespace_selectors(cluster: Cluster) -> None:
    apply(cluster, INGRESS)
    check(cluster, [
        (A_FE, A_WEB, "tcp", 8080, True),     # podSelector, port
        (A_FE, A_WEB, "tcp", 9000, False),    # other port
        (A_FE, A_WEB, "udp", 5353, False),    # UDP only from np-b's fe
        (B_FE, A_WEB, "udp", 5353, True),     # namespace + pod selector
        (B_DB, A_WEB, "udp", 5353, False),    # right namespace, wrong pod
        (B_FE, A_WEB, "tcp", 8080, False),    # other namespace's fe: not in the first rule
        (A_WEB, B_DB, "tcp", 8080, True),     # not egress-isolated; replies come back
        (A_FE, B_DB, "udp", 5353, True),      # pods no policy selects are unaffected
        (None, A_WEB, "tcp", 9000, True),     # the node (kubelet probes)
    ])  # fmt: skip


def test_egress_named_port_ipblock_except_and_range(cluster: Cluster) -> None:
    apply(cluster, egress("10.99.0.0/16", cluster.pods[A_FE].ip + "/32"))  # INGRESS is deleted
    check(cluster, [
        (B_FE, A_WEB, "tcp", 8080, True),     # named port http -> 8080 on np-a/web
        (B_FE, A_FE, "tcp", 8080, False),     # np-a/fe declares no http port
        (B_FE, A_WEB, "tcp", 9000, False),
        (B_FE, A_WEB, "udp", 5353, True),     # ipBlock, UDP range 5000-6000
        (B_FE, A_FE, "udp", 5353, False),     # the except
        (B_FE, B_DB, "tcp", 9000, False),
        (B_DB, B_FE, "tcp", 9000, True),      # fe is isolated for egress only; replies pass
        (A_FE, A_WEB, "tcp", 9000, True),     # web-in is gone
        (None, B_FE, "udp", 5353, True),      # the node
    ])  # fmt: skip


def test_label_and_namespace_label_changes_move_pods(cluster: Cluster) -> None:
    apply(cluster, INGRESS)
    assert reaches(cluster.pods[B_DB].netns, cluster.pods[A_WEB].ip, "udp", 5353) is False
    cluster.pods[B_DB].labels = {"app": "fe"}  # db joins the peers
    try:
        apply(cluster, INGRESS)
        check(cluster, [(B_DB, A_WEB, "udp", 5353, True)])
        cluster.namespaces["np-b"] = {"team": "c"}  # np-b leaves the namespace selector
        apply(cluster, INGRESS)
        check(cluster, [(B_DB, A_WEB, "udp", 5353, False), (B_FE, A_WEB, "udp", 5353, False)])
        cluster.pods[A_WEB].labels = {"app": "other"}  # web leaves the policy: unisolated
        apply(cluster, INGRESS)
        check(cluster, [(B_DB, A_WEB, "udp", 5353, True), (A_FE, A_WEB, "tcp", 9000, True)])
    finally:
        cluster.pods[B_DB].labels, cluster.pods[A_WEB].labels = {"app": "db"}, {"app": "web"}
        cluster.namespaces["np-b"] = {"team": "b"}


def test_restart_rebuilds_as_a_diff_and_foreign_rows_stay(cluster: Cluster) -> None:
    db = cluster.agent.node.endpoints["OVN_NB_DB"]
    nbctl = ["ovn-nbctl", f"--db={db}", "--timeout=10"]
    subprocess.run([*nbctl, "pg-add", "foreign_pg", "--", "acl-add", "foreign_pg", "to-lport", "5",
                    "ip4.src == 192.0.2.1", "drop", "--", "create", "Address_Set", "name=foreign_as",
                    "addresses=192.0.2.1"], check=True)  # fmt: skip
    try:
        apply(cluster, INGRESS)
        before = cluster.nb.counts()
        # While a second controller connects and re-applies, fe keeps being refused on 9000.
        stop, leaks = threading.Event(), []

        def probe() -> None:
            while not stop.is_set():
                if reaches(cluster.pods[A_FE].netns, cluster.pods[A_WEB].ip, "tcp", 9000, timeout=0.2):
                    leaks.append(1)

        t = threading.Thread(target=probe)
        t.start()
        fresh = PolicyNorthbound(db)
        try:
            desired, _ = translate([INGRESS], cluster.members(), cluster.namespaces, cluster.node_ips())
            assert fresh.apply(desired).total == 0  # nothing rewritten
            fe = {"podSelector": {"matchLabels": {"app": "fe"}}}
            ports = [{"port": 8080}, {"protocol": "UDP", "port": 5353}]
            changed = np("np-a", "web-in", podSelector={"matchLabels": {"app": "web"}},
                         ingress=[{"from": [fe], "ports": ports}])  # fmt: skip
            apply(cluster, changed, nb=fresh)
            after = fresh.counts()  # one rule fewer: one ACL and one address set fewer
            assert after == {**before, "acls": before["acls"] - 1, "address_sets": before["address_sets"] - 1}
        finally:
            stop.set()
            t.join()
            fresh.close()
        assert leaks == []
        check(cluster, [(A_FE, A_WEB, "udp", 5353, True), (B_FE, A_WEB, "udp", 5353, False)])
        apply(cluster)  # every policy deleted
        check(cluster, [(A_FE, A_WEB, "tcp", 9000, True), (B_DB, A_WEB, "udp", 5353, True)])
        assert cluster.nb.counts() == {"port_groups": 0, "acls": 0, "address_sets": 1}  # the nodes' set
        out = subprocess.run([*nbctl, "acl-list", "foreign_pg"], capture_output=True, text=True, check=True)
        assert "192.0.2.1" in out.stdout
        out = subprocess.run([*nbctl, "get", "Address_Set", "foreign_as", "addresses"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert "192.0.2.1" in out.stdout
    finally:
        subprocess.run([*nbctl, "--if-exists", "destroy", "Port_Group", "foreign_pg", "--",
                        "--if-exists", "destroy", "Address_Set", "foreign_as"], check=True)  # fmt: skip


def test_project_default_policies_isolate_a_project(cluster: Cluster) -> None:
    """The project controller's default-deny-except-DNS and allow-same-project, as OVN enforces them
    (np-a plays kube-system's part: its web pod is the "DNS" on UDP 5353)."""
    template = ProjectTemplate(dns_namespace="np-a", dns_port=5353)
    ns = {"metadata": {"name": "np-b", "uid": "u", "labels": {"plasmacloud.io/project-id": "p-b"}}}
    policies = [
        parse_policy(o.body) for o in desired_objects(ns, template) if o.kind.plural == "networkpolicies"
    ]
    cluster.namespaces["np-b"] = {"team": "b", "plasmacloud.io/project-id": "p-b"}
    try:
        apply(cluster, *policies)
        check(cluster, [
            (B_FE, A_WEB, "udp", 5353, True),     # "DNS" in the DNS namespace
            (B_FE, A_WEB, "tcp", 8080, False),    # anything else out of the project
            (B_FE, B_DB, "tcp", 9000, True),      # same project
            (A_FE, B_DB, "tcp", 9000, False),     # into the project from another
            (None, B_DB, "tcp", 9000, True),      # the node
        ])  # fmt: skip
    finally:
        cluster.namespaces["np-b"] = {"team": "b"}
        apply(cluster)


def test_a_foreign_row_with_our_name_is_not_taken_over(cluster: Cluster) -> None:
    taken = np("np-a", "taken", podSelector={"matchLabels": {"app": "web"}})
    nbctl = ["ovn-nbctl", f"--db={cluster.agent.node.endpoints['OVN_NB_DB']}", "--timeout=10"]
    name = policy_group("np-a/taken")
    subprocess.run(
        [*nbctl, "pg-add", name, "--", "set", "Port_Group", name, "external_ids:mine=yes"], check=True
    )
    try:
        # seen failing under load: the apply ran before the replica had the foreign row, so it
        # inserted a second one (constraint violation) instead of refusing the name
        replica_has(cluster.nb, "Port_Group", name, "external_ids", {"mine": "yes"})
        before = cluster.nb.counts()
        desired, _ = translate([INGRESS, taken], cluster.members(), cluster.namespaces, cluster.node_ips())
        with pytest.raises(NameTaken):
            cluster.nb.apply(desired)
        assert cluster.nb.counts() == before  # the whole transaction was refused, INGRESS included
        out = subprocess.run([*nbctl, "get", "Port_Group", name, "external_ids", "ports"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert 'mine="yes"' in out or "mine=yes" in out
        assert "[]" in out  # no ports added to it
    finally:
        subprocess.run([*nbctl, "--if-exists", "destroy", "Port_Group", name], check=True)


def replica_has(nb: PolicyNorthbound, table: str, record: str, column: str, want: Any) -> None:
    """Until `nb`'s IDL replica holds `want`: ovn-nbctl returns once the server committed, and the
    update reaches this client's monitor some milliseconds later."""
    deadline = time.monotonic() + 10
    while (have := _replica_value(nb, table, record, column)) != want:
        assert time.monotonic() < deadline, f"{table} {record} {column} is {have!r} here, never {want!r}"
        time.sleep(0.01)


def _replica_value(nb: PolicyNorthbound, table: str, record: str, column: str) -> Any:
    """The column's value in the replica, None while the row itself has not reached it yet."""
    try:
        return nb.api.db_get(table, record, column).execute(check_error=True)
    except RowNotFound:
        return None


def test_rows_changed_behind_our_back_are_repaired(cluster: Cluster) -> None:
    """Unchanged rows are not re-read on every apply; a change made by someone else still is seen
    by the first apply after it reached the IDL (not before: the replica is all apply can know)."""
    nbctl = ["ovn-nbctl", f"--db={cluster.agent.node.endpoints['OVN_NB_DB']}", "--timeout=10"]
    desired, _ = translate([INGRESS], cluster.members(), cluster.namespaces, cluster.node_ips())
    cluster.nb.apply(desired)
    # our own inserts marked the rows as changed: this apply compares them, so the one below
    # compares a row only because of the tampering (a row marked by ours would hide a missed repair)
    assert cluster.nb.apply(desired).total == 0
    aset, pg = f"{policy_group('np-a/web-in')}_in0", policy_group("np-a/web-in")
    want_ips = set(desired.address_sets[aset].addresses)
    woken = threading.Event()  # what queues the controller's reconcile
    cluster.nb.on_change(woken.set)
    try:
        subprocess.run([*nbctl, "clear", "Address_Set", aset, "addresses"], check=True)
        acl = subprocess.run([*nbctl, "--bare", "--columns=acls", "list", "Port_Group", pg],
                             capture_output=True, text=True, check=True).stdout.split()[0]  # fmt: skip
        subprocess.run([*nbctl, "set", "ACL", acl, 'match="ip4"'], check=True)
        replica_has(cluster.nb, "Address_Set", aset, "addresses", [])
        replica_has(cluster.nb, "ACL", acl, "match", "ip4")
        assert woken.is_set()  # the tampering alone wakes a reconcile: no Kubernetes event needed
        # the address set refilled, the port group's rewritten ACL replaced: nothing else
        assert cluster.nb.apply(desired) == ApplyStats(created=0, changed=2, deleted=0)
        out = subprocess.run([*nbctl, "--bare", "--columns=addresses", "list", "Address_Set", aset],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert set(out.split()) == want_ips
        matches = subprocess.run([*nbctl, "--bare", "--columns=match", "list", "ACL"],
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert all(m.strip() != "ip4" for m in matches.splitlines())  # the rewritten ACL is gone
        assert cluster.nb.apply(desired).total == 0
        # a port group of ours deleted by someone else: its uuid names nothing any more, its name
        # still does, and the apply (given the same desired state: it visits changed rows only) makes it again
        subprocess.run([*nbctl, "destroy", "Port_Group", pg], check=True)
        replica_has(cluster.nb, "Port_Group", pg, "name", None)
        assert cluster.nb.apply(desired) == ApplyStats(created=1, changed=0, deleted=0)
        out = subprocess.run([*nbctl, "--bare", "--columns=acls", "list", "Port_Group", pg],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert len(out.split()) == len(desired.port_groups[pg].acls)
        assert cluster.nb.apply(desired).total == 0
    finally:
        cluster.nb.on_change(lambda: None)
        cluster.nb.apply(Desired())
