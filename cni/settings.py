"""prismnet-agent configuration: the only reader of env and argv in the agent."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Self

from cni.platform_ports import PLATFORM_PORTS, parse_ports
from common.plasmacloud_grpc import PlasmaCloudAuth, add_flags
from ovnaccess import tls
from ovnaccess.tls import OvnTls

ENV_PREFIX = "PRISMNET_"
OWN_FLAGS = ("ovn_tls", "plasmacloud")
"""Fields whose flags another module defines (ovnaccess.tls: the OVN_SSL_* every program shares;
common.plasmacloud_grpc: PLASMACLOUD_*)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    socket: Path = Path("/run/prismnet/cni.sock")
    """Unix socket the `prismnet` executable talks to (its directory is made 0700)."""
    ovs_db: str = "unix:/run/openvswitch/db.sock"
    """OVSDB of the local ovs-vswitchd."""
    ovn_nb_db: str = "unix:/run/ovn/ovnnb_db.sock"
    """OVN northbound database (cluster-wide)."""
    bridge: str = "br-int"
    """The OVN integration bridge."""
    cluster_cidr: str = "10.244.0.0/16"
    """Pod network; every namespace switch gets a subnet carved from it."""
    subnet_prefix: int = 24
    """Prefix length of each namespace subnet."""
    mtu: int = 1400
    port_up_timeout: float = 30.0
    """Seconds an ADD waits for ovn-controller to install the port: long enough to ride out an OVN
    central leader change (northd's reconnect backoff), well within kubelet's 2 min runtime request
    timeout and the executable's 110 s."""
    metrics_address: str = "127.0.0.1:9465"
    """host:port for /metrics, /healthz and /readyz ('' disables)."""
    management_port: bool = True
    """Give the node an address on the pod network (node->pod probes, pod->node)."""
    masquerade: bool = True
    """Masquerade pod traffic leaving the cluster CIDR through the node (iptables)."""
    node_name: str = ""
    """Defaults to the OVS system-id (the OVN chassis name)."""
    management_interface: str = ""
    """Kernel name of the management port; default `pnm-<bridge>`."""
    log_level: str = "info"
    dns_servers: str = ""
    """Comma-separated nameservers returned in results (OVN IPAM)."""
    dns_search: str = ""
    """Comma-separated search domains returned in results (OVN IPAM)."""
    cluster_domain: str = ""
    """When set, results also search `<ns>.svc.<domain> svc.<domain> <domain>` with ndots:5 (OVN IPAM)."""
    plasmacloud: PlasmaCloudAuth | None = None
    """CA and IAM token file for PrismNET IPAM (`prismnetEndpoint`; --plasmacloud-*): none, none of it."""
    ovn_tls: OvnTls | None = None
    """The agent's key, certificate and the OVN CA, for `ssl:` remotes (flags from ovnaccess.tls)."""
    platform_ports: str = PLATFORM_PORTS
    """Ports of the platform on the nodes and OVN central that no pod may reach (README "The platform
    guard"); '' turns the guard off."""
    platform_addresses: str = ""
    """Comma-separated IPv4 addresses guarded besides the node's own and the OVN remotes' hosts."""
    ovn_rundir: str = ""
    """Where ovn-controller's control socket is, probed for prismnet_ovn_controller_up ('' = not)."""
    acl_log_file: str = ""
    """ovn-controller's log file, followed for policy verdicts (README "Policy verdict logs"); '' off."""
    verdict_series: int = 500
    """At most this many (namespace, policy, verdict) label sets; the rest count as _other."""
    events_kubeconfig: str = ""
    """Kubeconfig for PolicyDenied Events in the judged namespace ('' none; 'in-cluster')."""

    @property
    def management_if(self) -> str:
        """Kernel name of the management port (by default derived from the bridge, so node
        environments never collide)."""
        return self.management_interface or f"pnm-{self.bridge}"[:15]

    @property
    def cluster_network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.cluster_cidr)

    @classmethod
    def from_argv(cls, argv: Sequence[str], env: Mapping[str, str]) -> Self:
        parser = build_parser(env)
        ns = parser.parse_args(list(argv))
        try:
            out = cls.from_namespace(ns)
            out.validate()
        except ValueError as e:
            parser.error(str(e))
        return out

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> Self:
        """From build_parser's flags (validate() not called)."""
        auth = PlasmaCloudAuth.from_args(ns) if ns.plasmacloud_ca or ns.plasmacloud_token_file else None
        given = {f.name: getattr(ns, f.name) for f in fields(cls) if f.name not in OWN_FLAGS}
        return cls(**given, plasmacloud=auth, ovn_tls=OvnTls.from_args(ns))

    def validate(self) -> None:
        net = ipaddress.IPv4Network(self.cluster_cidr)
        if not net.prefixlen < self.subnet_prefix <= 30:
            raise ValueError(f"subnet prefix /{self.subnet_prefix} must be longer than {net} and at most /30")
        if len(self.bridge) > 15 or len(self.management_interface) > 15:
            raise ValueError("bridge and interface names are at most 15 characters")
        if self.verdict_series < 1:
            raise ValueError("verdict-series must be at least 1")
        if not 576 <= self.mtu <= 65535:
            raise ValueError("mtu must be between 576 and 65535")
        parse_ports(self.platform_ports)
        for addr in filter(None, self.platform_addresses.split(",")):
            ipaddress.IPv4Address(addr.strip())


def _bool(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prismnet-agent",
        description="PrismNET CNI node agent: serves the `prismnet` executable over a unix socket and "
        "wires pods into OVN. Every flag falls back to the environment variable shown.",
    )
    d = AgentSettings()
    types: dict[type, Callable[[str], Any]] = {int: int, float: float, bool: _bool, Path: Path, str: str}
    add_flags(parser, env)
    for f in fields(AgentSettings):
        if f.name in OWN_FLAGS:
            continue
        default = getattr(d, f.name)
        var = ENV_PREFIX + f.name.upper()
        conv = Path if isinstance(default, Path) else types[type(default)]
        value = conv(env[var]) if var in env else default
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            type=conv,
            default=value,
            metavar=var,
            help=f"{_doc(f.name)} (env {var}; default {default})",
        )
    tls.add_arguments(parser, env)
    return parser


def _doc(name: str) -> str:
    return {
        "socket": "unix socket for the prismnet executable",
        "ovs_db": "local OVSDB remote",
        "ovn_nb_db": "OVN northbound remote",
        "bridge": "OVN integration bridge",
        "cluster_cidr": "pod network CIDR",
        "subnet_prefix": "prefix length of each namespace subnet",
        "mtu": "default pod MTU",
        "port_up_timeout": "seconds to wait for ovn-installed",
        "metrics_address": "host:port for /metrics and health ('' disables)",
        "management_port": "create the node management port",
        "masquerade": "masquerade pod egress through the node",
        "node_name": "node name (default: OVS system-id)",
        "management_interface": "kernel name of the management port (default pnm-<bridge>)",
        "log_level": "log level",
        "dns_servers": "comma-separated nameservers in results",
        "dns_search": "comma-separated DNS search domains in results",
        "cluster_domain": "cluster domain: results search <ns>.svc.<domain> svc.<domain> <domain>, ndots:5",
        "platform_ports": "tcp:PORT[-PORT]/udp:... pods may never reach on the nodes and OVN central",
        "platform_addresses": "comma-separated IPv4 addresses guarded besides the node's and OVN central's",
        "ovn_rundir": "ovn-controller's run dir: its control socket probed for /metrics ('' = not probed)",
        "acl_log_file": "ovn-controller's log file, followed for policy verdicts ('' off)",
        "verdict_series": "cap on (namespace, policy, verdict) label sets of prismnet_policy_verdicts_total",
        "events_kubeconfig": "kubeconfig for PolicyDenied Events in the namespace ('' none, 'in-cluster')",
    }.get(name, name)
