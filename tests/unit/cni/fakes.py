"""In-memory stand-ins for the agent's adapters (same methods as cni.links / cni.ovn / cni.ovn_nb)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from cni.attachment import Attachment
from cni.ipam import Allocation
from cni.links import HostEnd, LinkState, NetnsGone, PodLinkConfig
from cni.ovn import OvsPort
from cni.ovn_nb import Lsp, SwitchInfo
from cni.wire import CniRequest, IpConfig, Route


class Done:
    def __init__(self, value: object) -> None:
        self.value = value
        self.fired_at = time.perf_counter()

    def wait(self, timeout: float) -> object:
        return self.value


@dataclass
class FakeLinks:
    host: dict[str, str] = field(default_factory=dict)  # name -> alias
    pods: dict[tuple[str, str], PodLinkConfig | None] = field(default_factory=dict)
    netns: set[str] = field(default_factory=set)
    tx_checksum_off: bool = True

    def create_veth(self, host_if: str, netns: str, pod_if: str, mtu: int, alias: str) -> HostEnd:
        if netns not in self.netns:
            raise NetnsGone(f"network namespace {netns} does not exist")
        self.host[host_if] = alias
        self.pods[(netns, pod_if)] = None
        return HostEnd(host_if, 7, "ee:ee:ee:ee:ee:ee", 2)

    def configure_pod(
        self, netns: str, pod: PodLinkConfig, index: int | None = None, host_index: int | None = None
    ) -> None:
        self.pods[(netns, pod.ifname)] = pod

    def exists(self, ifname: str) -> bool:
        return ifname in self.host

    def delete(self, ifname: str) -> bool:
        return self.host.pop(ifname, None) is not None

    def host_link(self, ifname: str) -> LinkState | None:
        return LinkState(ifname, 7, "ee:ee:ee:ee:ee:ee", 1400, True, (), ()) if ifname in self.host else None

    def pod_link(self, netns: str, ifname: str) -> LinkState | None:
        if netns not in self.netns:
            raise NetnsGone(netns)
        pod = self.pods.get((netns, ifname))
        if pod is None:
            return None
        return LinkState(ifname, 2, pod.mac, pod.mtu, True, pod.addresses, pod.routes, "", False)

    def owned_links(self) -> dict[str, str]:
        return {k: v.removeprefix("prismnet:") for k, v in self.host.items()}


@dataclass
class FakeOvs:
    ports: dict[str, dict[str, str]] = field(default_factory=dict)
    install: bool = True

    @contextmanager
    def expect_installed(self, host_if: str) -> Iterator[Done]:
        yield Done(self.install)

    def bind(self, host_if: str, lsp: str, external_ids: dict[str, str], *, internal: bool = False) -> None:
        self.ports[host_if] = {"iface-id": lsp, **external_ids}

    def unbind(self, host_if: str) -> None:
        self.ports.pop(host_if, None)

    def port(self, host_if: str) -> OvsPort | None:
        ids = self.ports.get(host_if)
        return OvsPort(host_if, ids, self.install) if ids is not None else None

    def owned_ports(self) -> list[OvsPort]:
        return [OvsPort(k, v, True) for k, v in self.ports.items() if "prismnet.container-id" in v]


@dataclass
class FakeEgress:
    resyncs: list[str] = field(default_factory=list)

    def resync(self, node: str) -> bool:
        self.resyncs.append(node)
        return False


@dataclass
class FakeNb:
    lsps: dict[str, Lsp] = field(default_factory=dict)
    switches: dict[str, SwitchInfo] = field(default_factory=dict)
    tracked_in: dict[str, str] = field(default_factory=dict)
    """lsp -> the egress address set add_port was given."""
    untracked_from: dict[str, str] = field(default_factory=dict)
    node_egress: FakeEgress = field(default_factory=FakeEgress)

    def ensure_switch(
        self, switch: str, cluster: object, prefix: int, subnet: object = None, gateway: str = ""
    ) -> SwitchInfo:
        return self.switches.setdefault(switch, SwitchInfo(switch, str(subnet or "10.0.0.0/24"), gateway))

    def add_port(
        self,
        switch: str,
        lsp: str,
        addresses: list[str],
        port_security: list[str],
        external_ids: dict[str, str],
        *,
        address_set: str = "",
    ) -> None:
        self.lsps[lsp] = Lsp(lsp, switch, tuple(addresses), "", True, dict(external_ids))
        self.tracked_in[lsp] = address_set

    def delete_port(self, lsp: str, *, address_set: str = "") -> None:
        self.lsps.pop(lsp, None)
        self.untracked_from[lsp] = address_set

    def egress(self) -> FakeEgress:
        return self.node_egress

    def port(self, lsp: str) -> Lsp | None:
        return self.lsps.get(lsp)

    def owned_ports(self, node: str) -> list[Lsp]:
        return [p for p in self.lsps.values() if p.external_ids.get("prismnet.node") == node]


class FakeDb:
    def __init__(self, up: bool = True) -> None:
        self.up = up

    def connected(self) -> bool:
        return self.up


@dataclass
class FakeIpam:
    name: str = "fake"
    self_recording: bool = True
    held: dict[str, str] = field(default_factory=dict)
    next_ip: int = 10

    def allocate(self, req: CniRequest, att: Attachment) -> Allocation:
        ip = f"10.0.0.{self.next_ip}/24"
        self.next_ip += 1
        self.held[att.container_id] = ip
        return Allocation(
            ips=(IpConfig(address=ip, gateway="10.0.0.1"),), routes=(Route(dst="0.0.0.0/0", gw="10.0.0.1"),)
        )

    def release(self, req: CniRequest, att: Attachment) -> None:
        self.held.pop(att.container_id, None)

    def problem(self, req: CniRequest) -> str:
        return ""
