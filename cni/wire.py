"""CNI wire types: the request (env vars + netconf on stdin) and the result, parsed once at the edge.

Stdlib only. Names follow the CNI SPEC (1.0/1.1, with 0.4.0 results for older runtimes).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from cni.errors import (
    SUPPORTED_VERSIONS,
    DecodeFailure,
    IncompatibleVersion,
    InvalidEnvironment,
    InvalidNetworkConfig,
)
from cni.shim import SOCKET_KEY, socket_path_problem

Command = Literal["ADD", "DEL", "CHECK", "GC", "STATUS"]
REQUIRED_ENV: dict[str, tuple[str, ...]] = {
    "ADD": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    "CHECK": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    "DEL": ("CNI_CONTAINERID", "CNI_IFNAME"),
    "GC": (),
    "STATUS": (),
}
_CONTAINER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")
_NET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")
MAX_CONTAINER_ID = 128
"""Runtimes use 64 hex digits. The host veth's ifalias `prismnet:<network>/<container id>/<ifname>`
must fit the kernel's 255 bytes: 9 + MAX_NETWORK_NAME + 1 + MAX_CONTAINER_ID + 1 + 15 = 218."""
MAX_NETWORK_NAME = 64
_OVSDB_REMOTE = re.compile(r"^(tcp|ssl|unix):.+$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
"""Kubernetes namespace names (IsDNS1123Label; length checked apart)."""
_POD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
"""Kubernetes pod names (DNS-1123 subdomains) and the container names podman sends in their place
(`[a-zA-Z0-9][a-zA-Z0-9_.-]*`, its generated ones such as `frosty_bose` included); length checked apart."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodRef:
    namespace: str = "default"
    name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class IpamConf:
    type: str
    raw: str
    """The ipam object as JSON, for delegation and for the plugin's own options."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OvnConf:
    northbound: str = ""
    southbound: str = ""
    encap_type: str = "geneve"


@dataclass(frozen=True, slots=True, kw_only=True)
class NetConf:
    cni_version: str
    name: str
    type: str
    mtu: int = 1400
    ipam: IpamConf | None = None
    ovn: OvnConf = field(default_factory=OvnConf)
    prismnet_endpoint: str = ""
    prev_result: CniResult | None = None
    valid_attachments: frozenset[tuple[str, str]] | None = None
    """GC only: `cni.dev/valid-attachments` as (containerID, ifname) pairs."""
    raw: str = "{}"
    """The whole netconf as received, for delegating to an IPAM plugin."""

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        if not data.strip():
            raise DecodeFailure("no network configuration on stdin (a JSON object is expected)")
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than json recurses
            raise DecodeFailure("cannot decode the network configuration on stdin", str(e)) from e
        if not isinstance(obj, dict):
            raise DecodeFailure("the network configuration must be a JSON object")
        return cls.from_dict(obj, json.dumps(obj))

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], raw: str) -> Self:
        version = _str(obj, "cniVersion", required=True)
        if version not in SUPPORTED_VERSIONS:
            raise IncompatibleVersion(
                f"cniVersion {version} is not supported", f"supported: {', '.join(SUPPORTED_VERSIONS)}"
            )
        name = _str(obj, "name", required=True)
        if len(name) > MAX_NETWORK_NAME or not _NET_NAME.match(name):
            raise InvalidNetworkConfig(
                f"invalid network name {name!r:.120}: "
                f"letters, digits, '_', '.', '-', at most {MAX_NETWORK_NAME}"
            )
        mtu = obj.get("mtu", 1400)
        if not isinstance(mtu, int) or isinstance(mtu, bool) or not 576 <= mtu <= 65535:
            raise InvalidNetworkConfig(f"mtu must be an integer between 576 and 65535, got {mtu!r}")
        prev = obj.get("prevResult")
        _agent_socket(obj)
        return cls(
            cni_version=version,
            name=name,
            type=_str(obj, "type", required=True),
            mtu=mtu,
            ipam=_ipam(obj.get("ipam")),
            ovn=_ovn(obj.get("ovn")),
            prismnet_endpoint=_str(obj, "prismnetEndpoint"),
            prev_result=CniResult.from_dict(prev) if prev is not None else None,
            valid_attachments=_attachments(obj),
            raw=raw,
        )


def _str(obj: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise InvalidNetworkConfig(f"network configuration lacks {key!r}")
        return ""
    if not isinstance(value, str) or (required and not value):
        raise InvalidNetworkConfig(f"{key!r} must be a non-empty string, got {value!r}")
    return value


def _agent_socket(obj: Mapping[str, Any]) -> None:
    """The shim reads `agentSocket` (cni/shim.py); the agent refuses a wrong one too, so that it is
    never ignored (the shim's PRISMNET_AGENT_SOCKET override skips it)."""
    value = obj.get(SOCKET_KEY)
    if value is not None and (problem := socket_path_problem(value)):
        raise InvalidNetworkConfig(f"{SOCKET_KEY!r} {problem}, got {value!r:.120}")


def _ipam(value: object) -> IpamConf | None:
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise InvalidNetworkConfig("'ipam' must be an object")
    ipam_type = value.get("type", "")
    if not isinstance(ipam_type, str) or not ipam_type or "/" in ipam_type:
        raise InvalidNetworkConfig(f"ipam.type must be a plugin name, got {ipam_type!r}")
    return IpamConf(type=ipam_type, raw=json.dumps(value))


def _ovn(value: object) -> OvnConf:
    if value is None:
        return OvnConf()
    if not isinstance(value, dict):
        raise InvalidNetworkConfig("'ovn' must be an object")
    out = OvnConf(
        northbound=_str(value, "northbound"),
        southbound=_str(value, "southbound"),
        encap_type=_str(value, "encapType") or "geneve",
    )
    for key, remote in (("northbound", out.northbound), ("southbound", out.southbound)):
        if remote and not all(_OVSDB_REMOTE.match(r) for r in remote.split(",")):
            raise InvalidNetworkConfig(f"ovn.{key} must be tcp:, ssl: or unix: remotes, got {remote!r}")
    if out.encap_type not in ("geneve", "vxlan", "stt"):
        raise InvalidNetworkConfig(f"ovn.encapType must be geneve, vxlan or stt, got {out.encap_type!r}")
    return out


def _attachments(obj: Mapping[str, Any]) -> frozenset[tuple[str, str]] | None:
    value = obj.get("cni.dev/valid-attachments")
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidNetworkConfig("cni.dev/valid-attachments must be a list")
    try:
        return frozenset((str(a["containerID"]), str(a["ifname"])) for a in value)
    except (KeyError, TypeError) as e:
        raise InvalidNetworkConfig("cni.dev/valid-attachments entries need containerID and ifname") from e


@dataclass(frozen=True, slots=True, kw_only=True)
class Interface:
    name: str
    mac: str = ""
    mtu: int = 0
    sandbox: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class IpConfig:
    address: str
    """CIDR notation, e.g. 10.244.1.5/24."""
    gateway: str = ""
    interface: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    dst: str
    gw: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Dns:
    nameservers: tuple[str, ...] = ()
    domain: str = ""
    search: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CniResult:
    interfaces: tuple[Interface, ...] = ()
    ips: tuple[IpConfig, ...] = ()
    routes: tuple[Route, ...] = ()
    dns: Dns = field(default_factory=Dns)

    def to_dict(self, version: str) -> dict[str, Any]:
        ifaces = [
            _drop_empty({"name": i.name, "mac": i.mac, "mtu": i.mtu, "sandbox": i.sandbox})
            for i in self.interfaces
        ]
        if version == "0.4.0":  # 0.4.0 results have no interface mtu but a per-ip version
            for i in ifaces:
                i.pop("mtu", None)
        ips = []
        for ip in self.ips:
            d = _drop_empty({"address": ip.address, "gateway": ip.gateway})
            if ip.interface is not None:
                d["interface"] = ip.interface
            if version == "0.4.0":
                d["version"] = "6" if ":" in ip.address else "4"
            ips.append(d)
        out: dict[str, Any] = {"cniVersion": version, "interfaces": ifaces, "ips": ips}
        if self.routes:
            out["routes"] = [_drop_empty({"dst": r.dst, "gw": r.gw}) for r in self.routes]
        dns = _drop_empty(
            {
                "nameservers": list(self.dns.nameservers),
                "domain": self.dns.domain,
                "search": list(self.dns.search),
                "options": list(self.dns.options),
            }
        )
        out["dns"] = dns
        return out

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        if not isinstance(obj, dict):
            raise InvalidNetworkConfig("prevResult must be an object")
        try:
            dns = obj.get("dns") or {}
            return cls(
                interfaces=tuple(
                    Interface(
                        name=i["name"],
                        mac=i.get("mac", ""),
                        mtu=int(i.get("mtu", 0)),
                        sandbox=i.get("sandbox", ""),
                    )
                    for i in obj.get("interfaces") or ()
                ),
                ips=tuple(
                    IpConfig(
                        address=str(ipaddress.ip_interface(p["address"])),
                        gateway=p.get("gateway", ""),
                        interface=p.get("interface"),
                    )
                    for p in obj.get("ips") or ()
                ),
                routes=tuple(Route(dst=r["dst"], gw=r.get("gw", "")) for r in obj.get("routes") or ()),
                dns=Dns(
                    nameservers=tuple(dns.get("nameservers") or ()),
                    domain=dns.get("domain", ""),
                    search=tuple(dns.get("search") or ()),
                    options=tuple(dns.get("options") or ()),
                ),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidNetworkConfig("cannot parse a CNI result", repr(e)) from e


def _drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in ("", 0, [], None)}


@dataclass(frozen=True, slots=True, kw_only=True)
class CniRequest:
    command: Command
    container_id: str = ""
    netns: str = ""
    """Path of the pod's network namespace; may be empty on DEL."""
    ifname: str = ""
    pod: PodRef = field(default_factory=PodRef)
    cni_args: str = ""
    path: tuple[str, ...] = ()
    netconf: NetConf

    @classmethod
    def from_env(cls, env: Mapping[str, str], stdin: bytes | str) -> Self:
        command = env.get("CNI_COMMAND", "")
        if command not in REQUIRED_ENV:
            raise InvalidEnvironment(
                f"unknown or missing CNI_COMMAND {command!r}",
                "expected ADD, DEL, CHECK, GC, STATUS or VERSION",
            )
        missing = [k for k in REQUIRED_ENV[command] if not env.get(k)]
        if missing:
            raise InvalidEnvironment(f"{command} needs {', '.join(missing)}")
        cid, ifname = env.get("CNI_CONTAINERID", ""), env.get("CNI_IFNAME", "")
        if cid and (len(cid) > MAX_CONTAINER_ID or not _CONTAINER_ID.match(cid)):
            raise InvalidEnvironment(
                f"invalid CNI_CONTAINERID {_clip(cid)!r}: "
                f"letters, digits, '_', '.', '-', at most {MAX_CONTAINER_ID}"
            )
        if ifname and not _kernel_ifname(ifname):
            raise InvalidEnvironment(f"invalid CNI_IFNAME {ifname!r}")
        netns = env.get("CNI_NETNS", "")
        if netns and not netns.startswith("/"):
            raise InvalidEnvironment(f"CNI_NETNS must be an absolute path, got {netns!r}")
        cni_args = env.get("CNI_ARGS", "")
        return cls(
            command=command,  # type: ignore[arg-type]
            container_id=cid,
            netns=netns,
            ifname=ifname,
            pod=_pod_ref(cni_args),
            cni_args=cni_args,
            path=tuple(p for p in env.get("CNI_PATH", "").split(":") if p),
            netconf=NetConf.from_json(stdin),
        )


_IFNAME_FORBIDDEN = frozenset(b"/:%\t\n\v\f\r \xa0")
"""The kernel's dev_valid_name: '/', ':' and its isspace() (Latin-1: 0xA0 too); '%' makes the name a
template (dev_alloc_name) that a fixed name cannot be."""


def _kernel_ifname(ifname: str) -> bool:
    """A name the kernel takes as is: at most IFNAMSIZ-1 = 15 bytes, checked as the bytes it sees."""
    raw = ifname.encode("utf-8", "surrogateescape")
    return len(raw) <= 15 and ifname not in (".", "..") and not _IFNAME_FORBIDDEN.intersection(raw)


def _pod_ref(cni_args: str) -> PodRef:
    args: dict[str, str] = {}
    for pair in filter(None, cni_args.split(";")):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidEnvironment(f"CNI_ARGS must be KEY=VALUE pairs separated by ';', got {pair!r}")
        args[key] = value
    namespace, name = args.get("K8S_POD_NAMESPACE") or "default", args.get("K8S_POD_NAME", "")
    if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        raise InvalidEnvironment(
            f"CNI_ARGS K8S_POD_NAMESPACE must be a Kubernetes namespace name (a DNS-1123 label of at most "
            f"63 characters), got {_clip(namespace)!r}"
        )
    if name and (len(name) > 253 or not _POD_NAME.match(name)):
        raise InvalidEnvironment(
            f"CNI_ARGS K8S_POD_NAME must be a Kubernetes pod name or a container name (letters, digits, "
            f"'_', '.', '-', at most 253 characters), got {_clip(name)!r}"
        )
    return PodRef(namespace=namespace, name=name)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
