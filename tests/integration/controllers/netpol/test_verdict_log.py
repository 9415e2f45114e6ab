"""Policy verdict logs on the real OVN: the annotated namespace's ACLs carry log/severity/name/meter,
a dropped TCP connection and an allowed UDP datagram come out of ovn-controller's log as `acl_log`
lines, and the PrismNET agent (following that log) turns them into JSON log lines and counters."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from controllers.netpol.acl_logging import METER, LogSetting
from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.translate import translate
from tests.integration.controllers.netpol.conftest import Cluster
from tests.integration.controllers.netpol.test_netpol_traffic import INGRESS
from tests.integration.controllers.netpol.traffic import in_netns, reaches
from tests.waiting import eventually

pytestmark = [pytest.mark.root, pytest.mark.ovn]


def _nbctl(c: Cluster, *args: str) -> str:
    db = c.agent.node.endpoints["OVN_NB_DB"]
    return subprocess.run(["ovn-nbctl", f"--db={db}", "--format=json", *args], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def _rows(c: Cluster, table: str, columns: str) -> list[dict[str, object]]:
    doc = json.loads(_nbctl(c, f"--columns={columns}", "list", table))
    return [dict(zip(doc["headings"], row, strict=True)) for row in doc["data"]]


def _metric(c: Cluster, labels: str) -> float:
    text = urllib.request.urlopen(c.agent.node.endpoints["PRISMNET_METRICS"], timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(f"prismnet_policy_verdicts_total{{{labels}}}"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_drop_and_allow_logged_with_meter_json_and_counter(cluster: Cluster) -> None:
    c = cluster
    nb = PolicyNorthbound(c.agent.node.endpoints["OVN_NB_DB"], log_rate=50)
    try:
        logging = {"np-a": LogSetting(deny="alert", allow="info")}
        desired, _ = translate([INGRESS], c.members(), c.namespaces, c.node_ips(), logging=logging)
        nb.apply(desired)
        c.sync()
        logged = {r["name"]: r for r in _rows(c, "ACL", "name,log,severity,meter,action") if r["log"]}
        assert set(logged) == {"np-deny/np-a/Ingress", "np/np-a/web-in"}
        assert logged["np-deny/np-a/Ingress"]["severity"] == "alert"
        assert logged["np-deny/np-a/Ingress"]["meter"] == METER
        meters = {r["name"]: r for r in _rows(c, "Meter", "name,unit,fair,bands")}
        assert meters[METER]["unit"] == "pktps" and meters[METER]["fair"] is True
        assert json.loads(_nbctl(c, "--columns=rate", "list", "Meter_Band"))["data"] == [[50]]

        log_file = c.agent.node.path("ovs", "ovn-controller.log")
        agent_log = c.agent.node.path("prismnet", "agent.log")
        start = log_file.stat().st_size
        agent_start = agent_log.stat().st_size if agent_log.exists() else 0
        web, b_fe = c.pods["np-a/web"], c.pods["np-b/fe"]
        assert not reaches(c.pods["np-b/db"].netns, web.ip, "tcp", 9000)  # dropped by np-a's default deny
        assert any(reaches(b_fe.netns, web.ip, "udp", 5353) for _ in range(3))  # allowed by web-in

        def lines() -> list[str]:
            with log_file.open() as f:
                f.seek(start)
                return [ln for ln in f if "|acl_log(" in ln]

        def both() -> bool:
            return {"drop", "allow"} <= {
                v for ln in lines() for v in ("drop", "allow") if f"verdict={v}" in ln
            }

        eventually(both, lambda: f"ovn-controller to log the drop and the allow: {lines()}", timeout=10)
        drop = next(ln for ln in lines() if "verdict=drop" in ln)
        assert 'name="np-deny/np-a/Ingress"' in drop and "severity=alert" in drop and "tp_dst=9000" in drop

        def verdicts() -> list[dict[str, object]]:
            with agent_log.open() as f:
                f.seek(agent_start)
                return [json.loads(ln) for ln in f if '"prismnet.verdict"' in ln and '"policy verdict"' in ln]

        eventually(
            lambda: len(verdicts()) >= 2, lambda: f"the agent's JSON verdict lines: {verdicts()}", timeout=10
        )
        got = {
            (v["verdict"], v["namespace"], v["policy"], v["direction"], v["protocol"], v["dport"])
            for v in verdicts()
        }
        assert ("drop", "np-a", "Ingress", "ingress", "tcp", 9000) in got
        assert ("allow", "np-a", "web-in", "ingress", "udp", 5353) in got
        drops = next(v for v in verdicts() if v["verdict"] == "drop")
        assert drops["src"] == c.pods["np-b/db"].ip and drops["dst"] == web.ip
        assert _metric(c, 'namespace="np-a",policy="np-deny/np-a/Ingress",verdict="drop"') >= 1
        assert _metric(c, 'namespace="np-a",policy="np/np-a/web-in",verdict="allow"') >= 1
    finally:
        nb.close()


def test_meter_rate_limits_the_log(cluster: Cluster) -> None:
    """A burst of 200 dropped datagrams logs at most about the meter's rate (5/s here), not 200."""
    c = cluster
    nb = PolicyNorthbound(c.agent.node.endpoints["OVN_NB_DB"], log_rate=5)
    try:
        desired, _ = translate([INGRESS], c.members(), c.namespaces, c.node_ips(),
                               logging={"np-a": LogSetting(deny="warning")})  # fmt: skip
        nb.apply(desired)
        c.sync()
        log_file: Path = c.agent.node.path("ovs", "ovn-controller.log")
        start = log_file.stat().st_size
        db, web = c.pods["np-b/db"], c.pods["np-a/web"]
        began = time.monotonic()
        in_netns(db.netns, lambda: _blast_udp(web.ip, 9999, 200))
        spent = time.monotonic() - began
        time.sleep(1.0)
        with log_file.open() as f:
            f.seek(start)
            n = sum(1 for ln in f if "|acl_log(" in ln and "tp_dst=9999" in ln)
        assert 1 <= n <= 5 * (spent + 1) + 5, (n, spent)
    finally:
        nb.close()


def _blast_udp(ip: str, port: int, n: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(n):
            s.sendto(b"x%d" % i, (ip, port))
