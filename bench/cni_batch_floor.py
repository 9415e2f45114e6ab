"""The density batch with no CNI at all: what OVN itself costs for N ports at concurrency C.

Each "pod" is a netns with a veth whose host end is up beforehand (the kernel's part is not
OVN's). Per port, timed from its first write until ovn-controller sets `ovn-installed`:

- `nbctl`: one `ovn-nbctl lsp-add ... -- lsp-set-addresses ... -- lsp-set-port-security` and one
  `ovs-vsctl --no-wait add-port ... iface-id=...` process per port, as a script would do it;
- `raw`: the same two transactions over one long-lived JSON-RPC connection per database (no
  process start, no schema download per port), one port per transaction;
- `idl`: bench/scale/floor.py's IdlFloor: one ovsdbapp IDL per database (as the agent connects),
  the ports waiting at the same moment written in one NB and then one OVS transaction (group
  commit): the most an agent could batch. `nbctl` is what a script pays; `raw` and `idl` bound
  what any agent can reach.

The ports go onto the namespace switches the CNI run made (addresses from .200 up, which the
density batches never reach), and are removed afterwards.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench import cpu
from bench.cni_floor import RawOvsdb, ids_have, lsp_ops, ovs_port_ops

FIRST_HOST = 200


class SharedRawOvsdb(RawOvsdb):
    """RawOvsdb whose requests may come from several threads (one send at a time)."""

    def __init__(self, remote: str, db: str, tables: dict[str, list[str]]) -> None:
        self._send_lock = threading.Lock()
        super().__init__(remote, db, tables)

    def _send(self, msg: dict[str, Any]) -> None:
        with self._send_lock:
            super()._send(msg)


@dataclass(frozen=True)
class FloorPort:
    netns: str
    host_if: str
    lsp: str
    switch: str
    mac: str
    ip: str
    node_netns: str = ""
    """The network namespace of the host end (a cluster node's); '' is the machine's own."""

    def ip_argv(self) -> list[str]:
        """`ip` in the namespace of the host end."""
        return ["ip", "-n", self.node_netns] if self.node_netns else ["ip"]


def switches(nb_db: str, names: list[str]) -> dict[str, str]:
    """switch name -> its subnet (prismnet.subnet), for the switches that exist."""
    out = {}
    for name in names:
        proc = subprocess.run(
            [
                "ovn-nbctl",
                f"--db={nb_db}",
                "--if-exists",
                "get",
                "Logical_Switch",
                name,
                "external_ids:prismnet.subnet",
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            out[name] = proc.stdout.strip().strip('"')
    return out


def link_name(tag: str, k: int) -> str:
    """The host end of floor port k: unique per process and tag, within Linux's 15 characters (the
    pods curve's tag `z1000-` with a 5-digit pid once made a 16-character name, which `ip` refused)."""
    name = f"pf{os.getpid() % 1000}{tag.rstrip('-')}x{k}"
    if len(name) > 15:
        raise ValueError(f"floor link name {name!r} longer than 15 characters: a shorter tag than {tag!r}")
    return name


def make_ports(
    n: int,
    subnets: dict[str, str],
    tag: str,
    ports: list[FloorPort],
    node_netns: Callable[[int], str] | None = None,
    first_host: int = FIRST_HOST,
) -> None:
    """Append n ports to `ports` (so the caller removes those made even if one fails); port k's
    host end in `node_netns(k)` when given (a cluster node's namespace)."""
    names = sorted(subnets)
    for k in range(n):
        sw = names[k % len(names)]
        net = ipaddress.IPv4Network(subnets[sw])
        ip = net.network_address + first_host + k // len(names)
        mac = "0a:59:" + ":".join(f"{b:02x}" for b in ip.packed)
        p = FloorPort(
            f"cnif-{os.getpid()}-{tag}{k}",
            link_name(tag, k),
            f"floor-{tag}-{k}",
            sw,
            mac,
            str(ip),
            node_netns(k) if node_netns else "",
        )
        ports.append(p)  # before anything exists: remove_ports takes whatever there is
        subprocess.run(["ip", "netns", "add", p.netns], check=True)
        subprocess.run(
            [
                *p.ip_argv(),
                "link",
                "add",
                p.host_if,
                "mtu",
                "1400",
                "up",
                "type",
                "veth",
                "peer",
                "eth0",
                "netns",
                p.netns,
            ],
            check=True,
        )
        subprocess.run(["ip", "-n", p.netns, "link", "set", "eth0", "address", mac, "up"], check=True)


def remove_ports(ports: list[FloorPort], e: dict[str, str] | Callable[[FloorPort], dict[str, str]]) -> None:
    """`e`: the node env (OVS_DB, OVN_NB_DB), or each port's."""
    for p in ports:
        pe = e(p) if callable(e) else e
        subprocess.run(
            ["ovs-vsctl", f"--db={pe['OVS_DB']}", "--no-wait", "--if-exists", "del-port", p.host_if],
            capture_output=True,
        )
        subprocess.run(
            ["ovn-nbctl", f"--db={pe['OVN_NB_DB']}", "--if-exists", "lsp-del", p.lsp], capture_output=True
        )
        subprocess.run([*p.ip_argv(), "link", "del", p.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", p.netns], capture_output=True)


def bind_nbctl(
    e: dict[str, str], bridge: str, netns: str = "", tls_flags: Sequence[str] = ()
) -> Callable[[FloorPort], None]:
    """ovn-nbctl + ovs-vsctl per port; inside `netns` (a cluster node's, with its own NB remotes
    and, for their `ssl:`, a certificate's `tls_flags`) when given, as a script on that node would
    run them."""
    inside = ["ip", "netns", "exec", netns] if netns else []

    def bind(p: FloorPort) -> None:
        addr = f"{p.mac} {p.ip}"
        subprocess.run(
            [
                *inside,
                "ovn-nbctl",
                f"--db={e['OVN_NB_DB']}",
                *tls_flags,
                "lsp-add",
                p.switch,
                p.lsp,
                "--",
                "lsp-set-addresses",
                p.lsp,
                addr,
                "--",
                "lsp-set-port-security",
                p.lsp,
                addr,
            ],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                *inside,
                "ovs-vsctl",
                f"--db={e['OVS_DB']}",
                "--no-wait",
                "add-port",
                bridge,
                p.host_if,
                "--",
                "set",
                "Interface",
                p.host_if,
                f"external_ids:iface-id={p.lsp}",
            ],
            check=True,
            capture_output=True,
        )

    return bind


def bind_raw(
    nb: RawOvsdb, ovs: RawOvsdb, bridge_uuid: str, switch_uuids: dict[str, str]
) -> Callable[[FloorPort], None]:
    def bind(p: FloorPort) -> None:
        nb.transact(*lsp_ops(p.lsp, f"{p.mac} {p.ip}", switch_uuids[p.switch]))
        ovs.transact(*ovs_port_ops(p.host_if, p.lsp, bridge_uuid))

    return bind


def until_installed(p: FloorPort, bind: Callable[[FloorPort], None], monitor: RawOvsdb) -> float:
    """ms from binding `p` until ovn-controller's external_ids:ovn-installed is seen."""
    since = len(monitor.events)
    t0 = time.monotonic()
    bind(p)
    deadline = t0 + 20
    while time.monotonic() < deadline:
        at = monitor.first(
            since,
            "Interface",
            lambda r: r.get("name") == p.host_if and ids_have(r, "ovn-installed", "true"),
        )
        if at is not None:
            return (at - t0) * 1000
        time.sleep(0.002)
    raise TimeoutError(f"{p.lsp} was not installed within 20 s")


@dataclass
class FloorRun:
    ms: list[float]
    wall: float
    cpu_ms: dict[str, float]

    @property
    def per_s(self) -> float:
        return len(self.ms) / self.wall


def timed_batch(
    ports: list[FloorPort],
    conc: int,
    bind: Callable[[FloorPort], None],
    monitor: RawOvsdb,
    labels: dict[str, str],
    sample: Callable[[dict[str, str]], cpu.Sample],
) -> FloorRun:
    """Bind every port at concurrency conc; each one's time runs until ovn-installed is seen."""
    before = sample(labels)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as ex:
        ms = list(ex.map(lambda p: until_installed(p, bind, monitor), ports))
    wall = time.perf_counter() - t0
    return FloorRun(ms, wall, cpu.per_pod_ms(before, sample(labels), len(ports)))


@contextmanager
def floor_binders(e: dict[str, str], switch_names: list[str]) -> Iterator[FloorBinders]:
    """The two ways of binding a floor port (`nbctl`, `raw`) onto the switches that exist."""
    subnets = switches(e["OVN_NB_DB"], switch_names)
    if not subnets:
        raise RuntimeError(f"none of the switches {switch_names} exists: run the CNI batch first")
    bridge = e["OVS_BRIDGE"]
    monitor = RawOvsdb(e["OVS_DB"], "Open_vSwitch", {"Interface": ["name", "external_ids"]})
    from bench.scale.floor import IdlFloor  # that module imports this one's FloorPort

    nb = SharedRawOvsdb(e["OVN_NB_DB"], "OVN_Northbound", {})
    ovs = SharedRawOvsdb(e["OVS_DB"], "Open_vSwitch", {})
    idl = IdlFloor(e["OVN_NB_DB"], e["OVS_DB"], bridge)
    try:
        uuids = {sw: nb.uuid_of("Logical_Switch", sw) for sw in subnets}
        yield FloorBinders(
            subnets,
            monitor,
            {
                "nbctl": bind_nbctl(e, bridge),
                "raw": bind_raw(nb, ovs, ovs.uuid_of("Bridge", bridge), uuids),
                "idl": idl.bind,
            },
        )
    finally:
        idl.close()
        for c in (monitor, nb, ovs):
            c.close()


@dataclass
class FloorBinders:
    subnets: dict[str, str]
    monitor: RawOvsdb
    bind: dict[str, Callable[[FloorPort], None]]


def batch_floors(
    e: dict[str, str],
    n: int,
    conc: int,
    labels: dict[str, str],
    sample: Callable[[dict[str, str]], cpu.Sample],
    switch_names: list[str],
) -> dict[str, FloorRun]:
    """Both floors, each on its own fresh set of ports (removed afterwards)."""
    out = {}
    with floor_binders(e, switch_names) as fb:
        for tag, bind in fb.bind.items():
            ports: list[FloorPort] = []
            try:
                make_ports(n, fb.subnets, tag[0], ports)
                time.sleep(0.5)  # ovs-vswitchd sees the new links before the clock starts
                out[tag] = timed_batch(ports, conc, bind, fb.monitor, labels, sample)
            finally:
                remove_ports(ports, e)
    return out


def sequence_floors(e: dict[str, str], n: int, switch_names: list[str]) -> dict[str, list[float]]:
    """The single-pod run with no CNI: one port at a time, each removed (OVN rows, veth, netns)
    before the next is bound, as the single-pod ADD run deletes each pod before the next ADD.
    The veths are made beforehand (the kernel's part is not OVN's)."""
    out: dict[str, list[float]] = {}
    with floor_binders(e, switch_names) as fb:
        for tag, bind in fb.bind.items():
            ports: list[FloorPort] = []
            try:
                make_ports(n, fb.subnets, "s" + tag[0], ports)
                time.sleep(0.5)
                out[tag] = []
                for p in ports:
                    out[tag].append(until_installed(p, bind, fb.monitor))
                    remove_ports([p], e)
            finally:
                remove_ports(ports, e)
    return out
