"""Verdict-logging annotations → ACL columns, and the translation carrying them."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.netpol.acl_logging import (
    ANNOTATION,
    METER,
    NAME_MAX,
    OFF,
    AclLog,
    InvalidLogSetting,
    LogSetting,
    acl_log,
    parse_reference,
    parse_setting,
    reference,
    setting_or_off,
)
from controllers.netpol.policy import parse_policy
from controllers.netpol.translate import Member, translate


def test_annotation_read_as_ovn_kubernetes_writes_it() -> None:
    s = parse_setting({ANNOTATION: '{"deny": "alert", "allow": "notice"}'})
    assert s == LogSetting(allow="notice", deny="alert")
    assert parse_setting({}) == OFF and parse_setting(None) == OFF
    assert parse_setting({ANNOTATION: '{"pass": "debug"}'}).severity("pass") == "debug"


@pytest.mark.parametrize(
    "raw, says",
    [("deny", "not JSON"), ('["deny"]', "JSON object"), ('{"drop": "alert"}', "unknown verdict"),
     ('{"deny": "loud"}', "is not one of")],
)  # fmt: skip
def test_bad_annotation_refused_and_logs_nothing(raw: str, says: str) -> None:
    with pytest.raises(InvalidLogSetting, match=says):
        parse_setting({ANNOTATION: raw})
    assert setting_or_off({ANNOTATION: raw}) == OFF


def test_reference_bounded_to_the_ovn_name_column_and_read_back() -> None:
    assert reference("np", "t1", "web") == "np/t1/web"
    assert parse_reference("np/t1/web") == parse_reference(reference("np", "t1", "web"))
    long_a, long_b = reference("np", "n" * 63, "a" * 253), reference("np", "n" * 63, "a" * 252 + "b")
    assert len(long_a) == len(long_b) == NAME_MAX and long_a != long_b
    ref = parse_reference(long_a)
    assert ref is not None and ref.truncated and ref.kind == "np"
    assert parse_reference("someone-else's acl") is None
    with pytest.raises(ValueError):
        reference("ovn", "", "x")


def test_acl_log_per_verdict() -> None:
    s = LogSetting(deny="alert")
    assert acl_log(s, "deny", "np-deny/t1/Ingress") == AclLog("np-deny/t1/Ingress", "alert", METER)
    assert acl_log(s, "allow", "np/t1/web") is None


def test_translation_logs_the_annotated_namespace_only() -> None:
    spec: dict[str, Any] = {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}
    pol = parse_policy({"metadata": {"namespace": "t1", "name": "web"}, "spec": spec})
    other = parse_policy({"metadata": {"namespace": "t2", "name": "web"}, "spec": {"podSelector": {}}})
    members = [
        Member(namespace=n, name="p", labels={}, lsp=f"{n}-p", ips=("10.0.0.1",)) for n in ("t1", "t2")
    ]
    desired, _ = translate([pol, other], members, {"t1": {}, "t2": {}}, [],
                           logging={"t1": LogSetting(allow="info", deny="warning")})  # fmt: skip
    logged = {(a.action, a.log) for pg in desired.port_groups.values() for a in pg.acls if a.log}
    assert logged == {
        ("allow-related", AclLog("np/t1/web", "info")),
        ("drop", AclLog("np-deny/t1/Ingress", "warning")),
    }
    unlogged_drops = [
        a for pg in desired.port_groups.values() for a in pg.acls if a.action == "drop" and not a.log
    ]
    assert len(unlogged_drops) == 1  # t2's default deny


def test_meter_rate_flag_refuses_zero() -> None:
    import argparse

    from controllers.netpol.settings import NetpolSettings, add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p, {"NETPOL_ACL_LOG_RATE": "7"})
    assert NetpolSettings.from_args(p.parse_args([])).acl_log_rate == 7
    with pytest.raises(ValueError, match="acl-log-rate"):
        NetpolSettings.from_args(p.parse_args(["--acl-log-rate", "0"]))


def test_admin_policies_logged_by_their_own_annotation() -> None:
    from controllers.netpol.admin_translate import admin_group, translate_admin
    from controllers.netpol.adminpolicy import parse_admin

    note = {ANNOTATION: '{"deny": "warning", "pass": "debug"}'}
    members = [Member(namespace=n, name="p", labels={}, lsp=f"{n}-p", ips=(f"10.0.0.{i}",))
               for i, n in enumerate(("a", "b"))]  # fmt: skip
    peers = [{"namespaces": {}}]
    logged = parse_admin({"metadata": {"name": "guard", "annotations": note}, "spec": {
        "priority": 5, "subject": {"namespaces": {}},
        "ingress": [{"name": "d", "action": "Deny", "from": peers},
                    {"name": "p", "action": "Pass", "from": peers}],
        "egress": [{"name": "a", "action": "Allow", "to": peers}]}}, baseline=False)  # fmt: skip
    quiet = parse_admin({"metadata": {"name": "default"}, "spec": {
        "subject": {"namespaces": {}}, "ingress": [{"name": "d", "action": "Deny", "from": peers}]}},
        baseline=True)  # fmt: skip
    desired, _ = translate([], members, {"a": {}, "b": {}}, [])
    translate_admin(desired, [logged, quiet], members, {"a": {}, "b": {}}, [])
    got = {(a.action, a.log) for a in desired.port_groups[admin_group("anp:guard")].acls}
    assert ("drop", AclLog("anp//guard", "warning")) in got  # the Deny rule
    assert ("allow-related", AclLog("anp//guard", "debug")) in got  # the Pass slot's fall-through
    assert ("allow-related", None) in got  # the egress Allow: allow not asked for
    assert all(a.log is None for a in desired.port_groups[admin_group("banp:default")].acls)
