"""cni/republish.py: after the NB was replaced, every pod port of the node written again from the OVS
Interface's external_ids and the pod's interface: same switch subnet and gateway, same MAC and
address, held; a pod whose interface is gone is skipped (GC's to remove)."""

from __future__ import annotations

import ipaddress
from typing import Any

from cni.attachment import Attachment
from cni.links import LinkState, NetnsGone
from cni.ovn import OvsPort
from cni.ovn_egress import pods_set_name
from cni.republish import republish
from cni.settings import AgentSettings


class RecordingNb:
    def __init__(self) -> None:
        self.switches: list[tuple[Any, ...]] = []
        self.ports: list[tuple[Any, ...]] = []

    def ensure_switch(
        self, switch: str, cluster: Any, prefix: int, subnet: Any, gateway: str, *, as_carved: bool
    ) -> None:
        self.switches.append((switch, str(subnet), gateway, as_carved))

    def add_port(self, switch: str, lsp: str, addresses: list[str], security: list[str],
                 ids: dict[str, str], *, address_set: str, held: bool) -> None:  # fmt: skip
        self.ports.append((switch, lsp, addresses, security, ids, address_set, held))


def port(cid: str, ns: str, pod: str) -> OvsPort:
    att = Attachment(container_id=cid, ifname="eth0", network="prismnet", namespace=ns, pod=pod,
                     netns=f"/run/netns/{cid}", node="node1")  # fmt: skip
    return OvsPort(f"veth{cid}", att.external_ids(), True)


def link(address: str, gateway: str) -> LinkState:
    ip = ipaddress.ip_interface(address).ip
    mac = "0a:58:" + ":".join(f"{b:02x}" for b in ip.packed)
    return LinkState("eth0", 2, mac, 1400, True, (address, "fe80::1/64"), (("0.0.0.0/0", gateway),))


def test_pods_come_back_held_with_their_own_address_subnet_and_gateway() -> None:
    s, nb = AgentSettings(cluster_cidr="10.95.0.0/16"), RecordingNb()
    links = {
        "/run/netns/c1": link("10.95.3.7/24", "10.95.3.1"),
        "/run/netns/c2": link("10.95.4.9/24", "10.95.4.254"),
    }
    done = republish(s, nb, [port("c1", "a", "web"), port("c2", "b", "db")], lambda ns, _if: links[ns])  # type: ignore[arg-type]
    assert (done.ports, done.skipped) == (2, 0)
    assert nb.switches == [
        ("k8s-a", "10.95.3.0/24", "10.95.3.1", True),
        ("k8s-b", "10.95.4.0/24", "10.95.4.254", False),
    ]
    switch, lsp, addresses, security, ids, address_set, held = nb.ports[0]
    assert (switch, lsp, held) == ("k8s-a", "web-c1", True)
    assert addresses == security == ["0a:58:0a:5f:03:07 10.95.3.7"]
    assert ids["prismnet.pod"] == "web" and address_set == pods_set_name("node1")


def test_a_pod_whose_interface_is_gone_is_skipped() -> None:
    def gone(netns: str, ifname: str) -> LinkState | None:
        raise NetnsGone(netns)

    nb = RecordingNb()
    done = republish(AgentSettings(cluster_cidr="10.95.0.0/16"), nb, [port("c1", "a", "web")], gone)  # type: ignore[arg-type]
    assert (done.ports, done.skipped, nb.ports) == (0, 1, [])
