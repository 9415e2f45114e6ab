"""PodNetworkService orchestration over in-memory adapters: rollback, idempotent DEL, CHECK, GC."""

from __future__ import annotations

import contextlib
import json

import pytest

from cni.daemon.service import Adapters, PodNetworkService
from cni.errors import CheckFailed, ContainerUnknown, PluginNotAvailable, PortNotReady
from cni.ovn_egress import pods_set_name
from cni.settings import AgentSettings
from cni.wire import CniRequest
from tests.unit.cni.fakes import FakeDb, FakeIpam, FakeLinks, FakeNb, FakeOvs

NETNS = "/run/netns/pod1"


@pytest.fixture
def parts() -> tuple[PodNetworkService, FakeLinks, FakeOvs, FakeNb, FakeIpam]:
    links, ovs, nb, ipam = FakeLinks(netns={NETNS}), FakeOvs(), FakeNb(), FakeIpam()
    adapters = Adapters(
        links=links,
        ovs=ovs,
        nb=nb,
        ovs_db=FakeDb(),
        nb_db=FakeDb(),  # type: ignore[arg-type]
        ovn_ipam=ipam,
    )
    return PodNetworkService(AgentSettings(port_up_timeout=0.01), adapters, "node-1"), links, ovs, nb, ipam


def req(command: str, cid: str = "c1", prev: dict | None = None, valid: list | None = None) -> CniRequest:
    conf: dict[str, object] = {"cniVersion": "1.1.0", "name": "prismnet", "type": "prismnet"}
    if prev is not None:
        conf["prevResult"] = prev
    if valid is not None:
        conf["cni.dev/valid-attachments"] = [{"containerID": c, "ifname": "eth0"} for c in valid]
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": cid,
        "CNI_NETNS": NETNS,
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web",
    }
    return CniRequest.from_env(env, json.dumps(conf))


def test_add_wires_everything_and_returns_the_result(parts) -> None:
    svc, links, ovs, nb, _ipam = parts
    result = svc.add(req("ADD")).to_dict("1.1.0")
    assert result["ips"] == [{"address": "10.0.0.10/24", "gateway": "10.0.0.1", "interface": 1}]
    assert (
        result["interfaces"][1]["sandbox"] == NETNS and result["interfaces"][1]["mac"] == "0a:58:0a:00:00:0a"
    )
    (host_if,) = links.host
    assert ovs.ports[host_if]["iface-id"] == "web-c1" and nb.lsps["web-c1"].switch == "k8s-ns1"
    assert nb.lsps["web-c1"].addresses == ("0a:58:0a:00:00:0a 10.0.0.10",)
    assert nb.tracked_in["web-c1"] == pods_set_name("node-1"), "the pod's IP joins its node's egress set"


def test_add_that_times_out_removes_all_it_made(parts) -> None:
    svc, links, ovs, nb, ipam = parts
    ovs.install = False
    with pytest.raises(PortNotReady) as e:
        svc.add(req("ADD"))
    assert e.value.code == 11
    assert (links.host, ovs.ports, nb.lsps, ipam.held) == ({}, {}, {}, {})


def test_a_failed_rollback_does_not_hide_the_adds_own_error(parts, caplog) -> None:
    """A full disk fails the ADD and then its rollback's NB write: kubelet must see the first error."""
    svc, links, ovs, nb, _ipam = parts
    ovs.install = False

    def refused(lsp: str, *, address_set: str = "") -> None:
        raise RuntimeError("ovsdb: I/O error: No space left on device")

    nb.delete_port = refused  # type: ignore[method-assign]
    with pytest.raises(PortNotReady):
        svc.add(req("ADD"))
    logged = [r for r in caplog.records if "failed too" in r.message]
    assert logged and "No space left" in (logged[0].exc_text or ""), "the rollback's error is logged"
    assert links.host == {}, "the rollback's other steps still ran"


class SlowPort:
    """ovn-installed arrives only on the second wait: a port held up by an OVN central election."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.fired_at = 0.0

    def wait(self, timeout: float) -> object:
        self.waits.append(timeout)
        return True if len(self.waits) > 1 else None


def test_a_slow_port_is_logged_and_still_waited_for(parts, monkeypatch, caplog) -> None:
    svc, _links, ovs, nb, _ipam = parts
    slow = SlowPort()
    monkeypatch.setattr(ovs, "expect_installed", lambda host_if: contextlib.nullcontext(slow))
    svc._s = AgentSettings(port_up_timeout=30.0)
    with caplog.at_level("WARNING"):
        svc.add(req("ADD"))
    assert slow.waits == [5.0, 25.0], "first the slow-port threshold, then the rest of the timeout"
    assert "web-c1 not installed by ovn-controller after 5 s; waiting up to 25 s more" in caplog.text
    assert "web-c1" in nb.lsps


def test_the_default_port_wait_rides_out_a_central_election() -> None:
    assert AgentSettings().port_up_timeout >= 30, "northd's reconnect backoff alone takes ~15-24 s"


def test_add_into_missing_netns_is_code_3_and_allocates_nothing(parts) -> None:
    svc, links, _ovs, nb, ipam = parts
    links.netns.clear()
    with pytest.raises(ContainerUnknown):
        svc.add(req("ADD"))
    assert ipam.held == {} and nb.lsps == {}


def test_del_is_idempotent(parts) -> None:
    svc, links, ovs, nb, ipam = parts
    svc.add(req("ADD"))
    svc.delete(req("DEL"))
    svc.delete(req("DEL"))
    assert (links.host, ovs.ports, nb.lsps, ipam.held) == ({}, {}, {}, {})
    assert nb.untracked_from["web-c1"] == pods_set_name("node-1")


def test_check_passes_then_names_each_drift(parts) -> None:
    svc, _links, ovs, _nb, _ipam = parts
    prev = svc.add(req("ADD")).to_dict("1.1.0")
    svc.check(req("CHECK", prev=prev))
    prev["interfaces"][1]["mac"] = "0a:58:00:00:00:01"
    ovs.ports[next(iter(ovs.ports))]["iface-id"] = "someone-else"
    with pytest.raises(CheckFailed) as e:
        svc.check(req("CHECK", prev=prev))
    assert "MAC is 0a:58:0a:00:00:0a, prevResult says 0a:58:00:00:00:01" in e.value.msg
    assert "is not bound to web-c1" in e.value.msg


def test_gc_removes_only_invalid_attachments(parts) -> None:
    svc, links, ovs, nb, ipam = parts
    for cid in ("keep", "drop1", "drop2"):
        svc.add(req("ADD", cid=cid))
    removed = svc.gc(req("GC", valid=["keep"]))
    assert removed == [("drop1", "eth0"), ("drop2", "eth0")]
    assert (
        set(nb.lsps) == {"web-keep"} and set(ipam.held) == {"keep"} and len(links.host) == len(ovs.ports) == 1
    )
    assert nb.node_egress.resyncs == ["node-1"], "GC also rebuilds the node's egress address set"


def test_status_reports_what_is_down(parts) -> None:
    svc, *_ = parts
    svc.status(req("STATUS"))
    svc._a.nb_db.up = False  # type: ignore[attr-defined]
    with pytest.raises(PluginNotAvailable) as e:
        svc.status(req("STATUS"))
    assert e.value.code == 50 and "northbound" in e.value.details
