"""The platform's project isolation as admin policies (pure): what project-controller writes, and that
the netpol translation reads it as meant (other projects denied, DNS allowed, the rest closed)."""

from __future__ import annotations

import argparse

import pytest

from controllers.netpol.acl_logging import ANNOTATION
from controllers.netpol.admin_translate import admin_group, peers_set, translate_admin
from controllers.netpol.adminpolicy import BASELINE_ADMIN_NETWORK_POLICIES, parse_admin
from controllers.netpol.translate import Desired, Member
from controllers.projects.admin_policies import DNS_POLICY, ISOLATION_LOGGING, desired, project_policy_name
from controllers.projects.main import isolation_logging_flag
from controllers.projects.template import MANAGED_BY, MANAGER, PROJECT_LABEL, ProjectTemplate

T = ProjectTemplate()


def test_one_isolation_anp_per_project_the_dns_anp_and_the_banp() -> None:
    got = desired(["p1", "p2", "p1"], T)
    names = [(k.kind, b["metadata"]["name"]) for k, b in got]
    assert names == [
        ("AdminNetworkPolicy", "project-p1"),
        ("AdminNetworkPolicy", "project-p2"),
        ("AdminNetworkPolicy", DNS_POLICY),
        ("BaselineAdminNetworkPolicy", "default"),
    ]
    assert all(b["metadata"]["labels"][MANAGED_BY] == MANAGER for _, b in got)
    prio = {b["metadata"]["name"]: b["spec"].get("priority") for _, b in got}
    assert prio[DNS_POLICY] < prio["project-p1"] == T.isolation_priority
    assert desired([], T) == []


def test_project_names_that_are_not_dns_labels_are_hashed() -> None:
    assert project_policy_name("Proj_X").startswith("project-") and "_" not in project_policy_name("Proj_X")


def test_the_translation_denies_other_projects_allows_dns_and_closes_the_rest() -> None:
    spaces = {"a": {PROJECT_LABEL: "p1"}, "b": {PROJECT_LABEL: "p2"}, "kube-system": {}}
    members = [
        Member(namespace=n, name="x", labels={}, lsp=f"{n}-x", ips=(ip,))
        for n, ip in (("a", "10.0.1.2"), ("b", "10.0.2.2"), ("kube-system", "10.0.3.2"))
    ]
    policies = [
        parse_admin(b, baseline=k is BASELINE_ADMIN_NETWORK_POLICIES) for k, b in desired(["p1", "p2"], T)
    ]
    out = Desired()
    outcomes = translate_admin(out, policies, members, spaces, [])
    assert all(o.ready for o in outcomes.values()), outcomes
    sets = {s.name: s.addresses for s in out.address_sets.values()}
    p1 = next(p for p in policies if p.name == "project-p1")
    assert sets[f"{peers_set(p1.ingress[0].peers)}_v4"] == {"10.0.1.2"}  # its own: passed on
    assert sets[f"{peers_set(p1.ingress[1].peers)}_v4"] == {
        "10.0.1.2",
        "10.0.2.2",
    }  # every project, not kube-system
    p2 = next(p for p in policies if p.name == "project-p2")
    assert peers_set(p2.ingress[1].peers) == peers_set(p1.ingress[1].peers)  # one set for all projects
    dns_peers = next(p for p in policies if p.name == DNS_POLICY).egress[0].peers
    assert sets[f"{peers_set(dns_peers)}_v4"] == {"10.0.3.2", "10.96.0.10/32"}
    assert out.port_groups[admin_group("banp:default")].ports == {"a-x", "b-x"}
    dns = {a.action for a in out.port_groups[admin_group("anp:" + DNS_POLICY)].acls}
    assert dns == {"allow-related"}


def test_project_anps_log_their_denies_by_default_and_not_when_turned_off() -> None:
    policies = {b["metadata"]["name"]: b for _, b in desired(["p1"], T, ISOLATION_LOGGING)}
    assert policies["project-p1"]["metadata"]["annotations"] == {ANNOTATION: ISOLATION_LOGGING}
    assert "annotations" not in policies[DNS_POLICY]["metadata"]  # only the isolation's verdicts
    assert "annotations" not in policies["default"]["metadata"]
    out = Desired()
    parsed = [parse_admin(b, baseline=k is BASELINE_ADMIN_NETWORK_POLICIES)
              for k, b in desired(["p1"], T, ISOLATION_LOGGING)]  # fmt: skip
    translate_admin(out, parsed, [], {}, [])
    acls = out.port_groups[admin_group("anp:project-p1")].acls
    logged = {(a.action, a.log.name, a.log.severity) for a in acls if a.log is not None}
    assert logged == {("drop", "anp//project-p1", "warning")}  # the Deny rules, not the Pass ones
    assert all("annotations" not in b["metadata"] for _, b in desired(["p1"], T, ""))


@pytest.mark.parametrize(
    ("value", "want"), [("off", ""), ("", ""), ('{"deny": "alert", "pass": "info"}', None)]
)
def test_the_isolation_logging_flag_is_checked_as_netpol_reads_it(value: str, want: str | None) -> None:
    assert isolation_logging_flag(value) == (value if want is None else want)


def test_a_severity_netpol_does_not_know_is_refused_at_startup() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="loud"):
        isolation_logging_flag('{"deny": "loud"}')
