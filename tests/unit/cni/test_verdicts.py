"""ACL log lines → verdicts, JSON log lines and bounded counters; the follower across rotation."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cni.acl_log import parse_line
from cni.verdicts import OTHER, LogFollower, VerdictCounters, handle

TCP = ('2026-11-27T17:40:01.123Z|00023|acl_log(ovn_pinctrl0)|INFO|name="np-deny/t1/Ingress", '
       "verdict=drop, severity=alert, direction=to-lport: tcp,vlan_tci=0x0000,dl_src=0a:58:0a:f4:01:05,"
       "dl_dst=0a:58:0a:f4:02:07,nw_src=10.244.1.5,nw_dst=10.244.2.7,nw_tos=0,nw_ecn=0,nw_ttl=63,"
       "nw_frag=no,tp_src=40112,tp_dst=8080,tcp_flags=syn")  # fmt: skip
UDP = ('2026-11-27T17:40:02.000Z|00024|acl_log(ovn_pinctrl0)|INFO|name="np/t1/dns", verdict=allow, '
       "severity=info, direction=from-lport: udp,vlan_tci=0x0000,dl_src=0a:58:0a:f4:01:05,"
       "dl_dst=0a:58:0a:f4:02:07,nw_src=10.244.1.5,nw_dst=10.244.2.8,nw_tos=0,nw_ecn=0,nw_ttl=64,"
       "nw_frag=no,tp_src=5000,tp_dst=53")  # fmt: skip


def test_tcp_drop_line() -> None:
    v = parse_line(TCP)
    assert v is not None
    assert (v.kind, v.namespace, v.policy, v.verdict, v.severity, v.direction) == (
        "np-deny",
        "t1",
        "Ingress",
        "drop",
        "alert",
        "ingress",
    )
    assert (v.protocol, v.src, v.sport, v.dst, v.dport) == ("tcp", "10.244.1.5", 40112, "10.244.2.7", 8080)


def test_udp_allow_line_and_others_ignored() -> None:
    v = parse_line(UDP)
    assert v is not None and (v.protocol, v.direction, v.policy, v.dport) == ("udp", "egress", "dns", 53)
    assert parse_line("2026-11-27T17:40:01.123Z|00001|vlog|INFO|opened log file") is None
    unnamed = parse_line(TCP.replace('name="np-deny/t1/Ingress", ', ""))
    assert unnamed is not None and (unnamed.kind, unnamed.namespace) == ("", "")


def _value(reg: CollectorRegistry, ns: str, policy: str, verdict: str) -> float:
    got = reg.get_sample_value("prismnet_policy_verdicts_total",
                               {"namespace": ns, "policy": policy, "verdict": verdict})  # fmt: skip
    return got or 0.0


def test_json_line_and_counter(caplog: pytest.LogCaptureFixture) -> None:
    reg = CollectorRegistry()
    counters = VerdictCounters(reg)
    with caplog.at_level(logging.INFO, "prismnet.verdict"):
        assert len(handle(["noise", TCP, TCP, UDP], counters, None)) == 3
    assert _value(reg, "t1", "np-deny/t1/Ingress", "drop") == 2
    assert _value(reg, "t1", "np/t1/dns", "allow") == 1
    rec = caplog.records[0]
    assert (rec.namespace, rec.verdict, rec.dst, rec.dport) == ("t1", "drop", "10.244.2.7", 8080)  # type: ignore[attr-defined]
    from common.jsonlog import JsonFormatter

    line = json.loads(JsonFormatter().format(rec))
    assert line["policy"] == "Ingress" and line["protocol"] == "tcp" and line["src"] == "10.244.1.5"


def test_label_sets_capped_and_folded() -> None:
    reg = CollectorRegistry()
    counters = VerdictCounters(reg, max_series=2)
    lines = [TCP.replace("t1/Ingress", f"t{i}/Ingress") for i in range(5)]
    handle(lines + lines[:1], counters, None)
    assert _value(reg, "t0", "np-deny/t0/Ingress", "drop") == 2  # a known set keeps counting
    assert _value(reg, OTHER, OTHER, "drop") == 3
    assert reg.get_sample_value("prismnet_policy_verdict_series_folded_total") == 3
    series = [s for m in reg.collect() if m.name == "prismnet_policy_verdicts" for s in m.samples
              if s.name.endswith("_total")]  # fmt: skip
    assert len(series) == 3


def test_follower_from_the_end_across_rotation_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "ovn-controller.log"
    f = LogFollower(path)
    assert f.read() == []  # no file yet
    path.write_text("old\n")
    assert f.read() == []  # opened at its end
    with path.open("a") as w:
        w.write("a\nb")
    assert f.read() == ["a"]  # b waits for its newline
    with path.open("a") as w:
        w.write("\n")
    assert f.read() == ["b"]
    os.rename(
        path, tmp_path / "ovn-controller.log.1"
    )  # logrotate: the writer appends once more, then reopens
    with (tmp_path / "ovn-controller.log.1").open("a") as w:
        w.write("last-of-old\n")
    path.write_text("first-of-new\n")
    assert f.read() == ["last-of-old", "first-of-new"]
    path.write_text("t\n")  # truncated (copytruncate) and rewritten
    assert f.read() == ["t"]
    f.close()


def test_agent_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from cni.settings import AgentSettings

    s = AgentSettings.from_argv([], {"PRISMNET_ACL_LOG_FILE": "/run/ovn/ovn-controller.log"})
    assert (s.acl_log_file, s.verdict_series) == ("/run/ovn/ovn-controller.log", 500)
    with pytest.raises(SystemExit):
        AgentSettings.from_argv(["--verdict-series", "0"], {})
    assert "verdict-series must be at least 1" in capsys.readouterr().err


def test_namespace_of_a_cluster_scoped_policys_verdict() -> None:
    from cni.ovn import Lsp
    from cni.port_namespaces import PortNamespaces

    now, reads = [0.0], []

    def ports() -> list[Lsp]:
        reads.append(now[0])
        return [Lsp(name="web-c1", switch="k8s-t1", addresses=("0a:58:0a:f4:02:07 10.244.2.7",),
                    dynamic_addresses="", up=True, external_ids={"prismnet.namespace": "t1"})]  # fmt: skip

    lookup = PortNamespaces(ports, clock=lambda: now[0])
    assert lookup("10.244.2.7") == "t1" and lookup("10.244.2.7") == "t1" and reads == [0.0]
    assert lookup("10.244.9.9") == "" and reads == [0.0]  # a miss within REFRESH reads nothing
    now[0] = 5.0
    assert lookup("10.244.9.9") == "" and reads == [0.0, 5.0]
    reg = CollectorRegistry()
    anp_line = TCP.replace('name="np-deny/t1/Ingress"', 'name="anp//deny-all"')
    (v,) = handle([anp_line], VerdictCounters(reg), lookup)
    assert (v.kind, v.namespace, v.policy) == ("anp", "t1", "deny-all")
