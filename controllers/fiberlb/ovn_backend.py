"""The `ovn` backend: OVN Load_Balancer rows for each Service (the only ovsdbapp importer in fiberlb/).

Per Service and protocol one row named `fiberlb:<namespace>/<name>:<protocol>`, found again
by that name (an IDL index) and its `external_ids`, whose `vips` map every address the Service
answers on (external IPs, the ClusterIP) and port to its endpoints `ip:targetPort`. Options:
`reject=true` (no endpoints: TCP RST / ICMP port unreachable, not a blackhole), `ct_flush=true` on
UDP rows (a removed backend's UDP flows are flushed; its TCP connections drain), `affinity_timeout`
for session affinity (OVN's maximum 65535 s), `selection_fields=ip_src` for the ip-hash algorithm.
Health-check annotations become Load_Balancer_Health_Check rows plus `ip_port_mappings` (OVN probes
TCP/UDP only: an HTTP path is probed as a TCP connect).

Every row sits in one Load_Balancer_Group, `fiberlb`, attached to each namespace switch
`k8s-<ns>` (pods and the node's management switch `k8s-mgmt.<node>` send VIP traffic through
one of them, where OVN DNATs it) and to the cluster router. Each apply is one NB transaction
that changes only the columns that differ, so unchanged Services cost no NB write.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from typing import Any

from cni.ovn import LB_GROUP, ROUTER
from controllers.fiberlb.backend import Applied, BackendError
from controllers.fiberlb.desired import DesiredLB, Listener
from controllers.fiberlb.owned_rows import OwnedRows, holds, references, size
from ovnaccess.commands import Command, by_name, read
from ovnaccess.connection import Ovsdb, OvsdbUnavailable, connect

log = logging.getLogger(__name__)

GROUP = LB_GROUP  # prismnet-agent attaches it to a namespace switch as it creates one
SWITCH_PREFIX = "k8s-"
K_OWNER, K_SERVICE, K_UID, K_PROTO = "fiberlb.owner", "fiberlb.service", "fiberlb.uid", "fiberlb.protocol"
K_EXTERNAL = "fiberlb.external-ips"
"""The Service's external IPs, space-separated: the controller's record of its allocation (a new
leader restores the pool from it, never from the Service's status, which a tenant may write)."""
OWNER = "fiberlb-controller"
FULL_CHECK_EVERY = 150
"""attach() calls between two checks of every row of ours (150 calls 2 s apart: 5 minutes)."""
TABLES = dict.fromkeys(
    (
        "Load_Balancer",
        "Load_Balancer_Health_Check",
        "Load_Balancer_Group",
        "Logical_Switch",
        "Logical_Switch_Port",
        "Logical_Router",
    )
)


def lb_name(service: str, protocol: str) -> str:
    return f"fiberlb:{service}:{protocol.lower()}"


def connect_nb(remote: str, timeout: float = 10.0) -> Ovsdb:
    """The NB database at `remote` (a remote list for a cluster)."""
    try:
        return connect(remote, "OVN_Northbound", TABLES, timeout=timeout)
    except (OvsdbUnavailable, ValueError) as e:
        raise BackendError(str(e)) from e


def _vips(desired: DesiredLB, listeners: Iterable[Listener]) -> dict[str, str]:
    return {
        f"{vip}:{lst.port}": ",".join(f"{b.ip}:{b.port}" for b in lst.backends)
        for lst in listeners
        for vip in desired.vips
    }


def _host(vip: str) -> str:
    """ "192.0.2.1:80" → "192.0.2.1" (OVN's vips keys; IPv6 ones are bracketed)."""
    return vip.rsplit(":", 1)[0].strip("[]")


def _options(desired: DesiredLB, proto: str) -> dict[str, str]:
    """`ct_flush` (ovn-controller drops the conntrack entries of a removed backend) only for UDP, as
    kube-proxy clears only stale UDP entries: a TCP connection to a backend that left the Service (a
    terminating pod of a rolling update) is drained, not cut, and a connection opened just before the
    change is not left hanging."""
    opts = {"reject": "true", **({"ct_flush": "true"} if proto == "udp" else {})}
    if desired.options.affinity_timeout:
        opts["affinity_timeout"] = str(desired.options.affinity_timeout)
    return opts


def _ours(row: Any) -> bool:
    return bool(row.external_ids.get(K_OWNER) == OWNER)


def _owned(api: Any, service: str) -> list[Any]:
    return [
        row
        for proto in ("tcp", "udp", "sctp")
        if (row := by_name(api, "Load_Balancer", lb_name(service, proto))) is not None and _ours(row)
    ]


class _Group(Command):  # type: ignore[misc]
    """The `fiberlb` group attached to every namespace switch and the cluster router, holding every
    row we own (a row taken out of it by hand is put back). Checked: the rows created or changed
    since the last run, and every row of ours when the group holds fewer references than we own
    rows or `full` (owned_rows.py: no row's columns are converted for that)."""

    def __init__(self, api: Any, owned: OwnedRows, full: bool) -> None:
        super().__init__(api)
        self.owned, self.full = owned, full
        self.checked: set[Any] = set()

    def run_idl(self, txn: Any) -> None:
        group = ensure_group(self.api, txn)
        members = references(group, "load_balancer")
        self.checked = self.owned.take_changed()
        if self.full or members is None or size(members) < len(self.owned.uuids):
            self.checked |= self.owned.uuids
        rows = self.api.tables["Load_Balancer"].rows
        added = 0
        for u in self.checked:
            row = rows.get(u)
            if row is not None and not holds(members, u):
                group.addvalue("load_balancer", row)
                added += 1
        self.result = added


def ensure_group(api: Any, txn: Any) -> Any:
    group = by_name(api, "Load_Balancer_Group", GROUP)
    if group is None:
        group = txn.insert(api.tables["Load_Balancer_Group"])
        group.name = GROUP
    targets = [r for r in api.tables["Logical_Switch"].rows.values() if r.name.startswith(SWITCH_PREFIX)]
    router = by_name(api, "Logical_Router", ROUTER)
    targets += [router] if router is not None else []
    for row in targets:
        if group not in row.load_balancer_group:
            row.addvalue("load_balancer_group", group)
    return group


Probes = tuple[dict[str, str], dict[str, str]]
"""(endpoint IP -> "<logical port>:<probe source IP>", switch -> probe source IP)"""


class _Apply(Command):  # type: ignore[misc]
    def __init__(self, api: Any, desired: DesiredLB, probes: Probes) -> None:
        super().__init__(api)
        self.desired, self.hc_ports, self.sources = desired, probes[0], probes[1]

    def run_idl(self, txn: Any) -> None:
        group = ensure_group(self.api, txn)
        d = self.desired
        wanted = {p.lower(): [x for x in d.listeners if x.protocol == p] for p in d.protocols}
        for row in _owned(self.api, d.service):
            if row.external_ids.get(K_PROTO) not in wanted:
                row.delete()
        changes = 0
        for proto, listeners in wanted.items():
            name = lb_name(d.service, proto)
            row = by_name(self.api, "Load_Balancer", name)
            if row is None:
                row = txn.insert(self.api.tables["Load_Balancer"])
                row.name, row.protocol = name, [proto]
                row.health_check, row.ip_port_mappings = [], {}
                group.addvalue("load_balancer", row)
                changes += 1
            ids = {K_OWNER: OWNER, K_SERVICE: d.service, K_UID: d.uid, K_PROTO: proto}
            if d.external_ips:
                ids[K_EXTERNAL] = " ".join(d.external_ips)
            changes += _set(row, "external_ids", ids)
            changes += _set(row, "vips", _vips(d, listeners))
            changes += _set(row, "options", _options(d, proto))
            changes += _set(row, "selection_fields", ["ip_src"] if d.options.algorithm == "ip-hash" else [])
            changes += self._health_checks(txn, row, listeners)
        self.result = changes  # (group membership of existing rows: repaired by attach())

    def _health_checks(self, txn: Any, row: Any, listeners: list[Listener]) -> int:
        hc = self.desired.options.health_check
        if hc is None:
            return _set(row, "health_check", []) + _set(row, "ip_port_mappings", {})
        opts = {
            "interval": str(max(1, round(hc.interval))),
            "timeout": str(max(1, round(hc.timeout))),
            "success_count": "1",
            "failure_count": str(hc.retries),
        }
        want = {f"{vip}:{lst.port}" for lst in listeners for vip in self.desired.vips}
        changes = 0
        for check in list(row.health_check):
            if check.vip not in want:
                row.delvalue("health_check", check)
                changes += 1
        have = {c.vip: c for c in row.health_check}
        for vip in sorted(want):
            check = have.get(vip)
            if check is None:
                check = txn.insert(self.api.tables["Load_Balancer_Health_Check"])
                check.vip = vip
                row.addvalue("health_check", check)
                changes += 1
            changes += _set(check, "options", opts)
        backends = {b.ip for lst in listeners for b in lst.backends}
        for switch, source in self.sources.items():
            changes += _reserve(self.api, switch, source)
        return changes + _set(
            row, "ip_port_mappings", {ip: self.hc_ports[ip] for ip in backends if ip in self.hc_ports}
        )


def _reserve(api: Any, switch: str, address: str) -> int:
    """Keep the probe source address out of the switch's pod addresses (`exclude_ips`, which OVN
    and the PrismNET IPAM both honour)."""
    ls = by_name(api, "Logical_Switch", switch)
    excluded = ls.other_config.get("exclude_ips", "").split() if ls is not None else [address]
    if address in excluded:
        return 0
    ls.setkey("other_config", "exclude_ips", " ".join([*excluded, address]))
    return 1


def _set(row: Any, column: str, value: Any) -> int:
    try:
        current = getattr(row, column)
    except AttributeError:  # a row inserted in this transaction: nothing to compare with
        setattr(row, column, value)
        return 1
    if (dict(current) == value) if isinstance(value, dict) else (sorted(current) == sorted(value)):
        return 0
    setattr(row, column, value)
    return 1


class _Delete(Command):  # type: ignore[misc]
    def __init__(self, api: Any, service: str) -> None:
        super().__init__(api)
        self.service = service

    def run_idl(self, txn: Any) -> None:
        rows = _owned(self.api, self.service)
        for row in rows:
            row.delete()  # the group's reference is weak: it goes with the row
        self.result = len(rows)


def _health_check_ports(api: Any, ips: set[str]) -> Probes:
    """Where OVN's service monitor probes each endpoint from: the last host address of the endpoint's
    switch subnet (ovn-northd answers ARP for it), reserved on that switch."""
    out: dict[str, str] = {}
    sources: dict[str, str] = {}
    for ls in api.tables["Logical_Switch"].rows.values():
        subnet = ls.external_ids.get("prismnet.subnet") or ls.other_config.get("subnet")
        if not subnet:
            continue
        net = ipaddress.IPv4Network(subnet, strict=False)
        source = str(net.broadcast_address - 1)
        for port in ls.ports:
            for entry in port.addresses:
                for word in entry.split()[1:]:
                    if word in ips:
                        out[word] = f"{port.name}:{source}"
                        sources[ls.name] = source
    return out, sources


class OvnBackend:
    """Load balancers as OVN Load_Balancer rows (see module doc)."""

    name = "ovn"
    programs_cluster_ips = True
    shares_ips = True
    allocates_ips = False

    def __init__(self, db: Ovsdb) -> None:
        self.db, self._api = db, db.api
        self.nb_writes = 0
        """Transactions that changed something (for the benchmark's NB writes/s)."""
        self.owned = OwnedRows(_ours)
        self._attaches = 0
        db.on_row_change("Load_Balancer", self.owned.on_row)
        db.on_replaced(self._index_rows)
        self._read(lambda api: self._index_rows())  # on the connection's thread: no hook interleaves

    def _index_rows(self) -> None:
        self.owned.reset(self._api.tables["Load_Balancer"].rows.values())

    @classmethod
    def connect(cls, remote: str) -> OvnBackend:
        return cls(connect_nb(remote))

    def apply(self, desired: DesiredLB) -> Applied:
        probes: Probes = ({}, {})
        if desired.options.health_check is not None:
            ips = {b.ip for lst in desired.listeners for b in lst.backends}
            probes = self._read(lambda api: _health_check_ports(api, ips))
        try:
            changes = _Apply(self._api, desired, probes).execute(check_error=True, log_errors=False)
        except Exception as e:
            raise BackendError(f"OVN northbound transaction for {desired.service} failed: {e}") from e
        if changes:
            self.nb_writes += 1
            log.info("programmed %s (%d column changes)", desired.service, changes)
        return Applied()

    def delete(self, service: str, uid: str) -> None:
        try:
            removed = _Delete(self._api, service).execute(check_error=True, log_errors=False)
        except Exception as e:
            raise BackendError(f"OVN northbound delete of {service} failed: {e}") from e
        if removed:
            self.nb_writes += 1
            log.info("removed the load balancers of %s", service)

    def attach(self) -> int:
        """Attach the group to switches created since the last apply and put our rows missing from
        it back (called every 2 s; every FULL_CHECK_EVERY-th call checks every row of ours)."""
        self._attaches += 1
        cmd = _Group(self._api, self.owned, full=self._attaches % FULL_CHECK_EVERY == 0)
        try:
            added: int = cmd.execute(check_error=True, log_errors=False)
        except Exception:
            self._read(lambda api: self.owned.put_back(cmd.checked))
            raise
        if added:
            log.warning("put %d load balancers of ours back into the %s group", added, GROUP)
        return added

    def services(self) -> set[str]:
        def fn(api: Any) -> set[str]:
            return {
                r.external_ids[K_SERVICE]
                for r in api.tables["Load_Balancer"].rows.values()
                if r.external_ids.get(K_OWNER) == OWNER and K_SERVICE in r.external_ids
            }

        return self._read(fn)  # type: ignore[no-any-return]

    def allocations(self) -> dict[str, tuple[str, ...]]:
        """From our rows' external_ids (rows written before that key existed: every VIP address;
        the reconciler keeps only pool addresses that are not the Service's ClusterIP)."""

        def fn(api: Any) -> dict[str, tuple[str, ...]]:
            out: dict[str, tuple[str, ...]] = {}
            for r in api.tables["Load_Balancer"].rows.values():
                ids = r.external_ids
                if ids.get(K_OWNER) != OWNER or K_SERVICE not in ids:
                    continue
                ips = ids[K_EXTERNAL].split() if K_EXTERNAL in ids else [_host(v) for v in r.vips]
                out[ids[K_SERVICE]] = tuple(dict.fromkeys([*out.get(ids[K_SERVICE], ()), *ips]))
            return out

        return self._read(fn)  # type: ignore[no-any-return]

    def rows(self, service: str) -> dict[str, dict[str, Any]]:
        """protocol → the row's vips, options, selection_fields, ip_port_mappings, health checks."""

        def fn(api: Any) -> dict[str, dict[str, Any]]:
            return {
                r.external_ids[K_PROTO]: {
                    "vips": dict(r.vips),
                    "options": dict(r.options),
                    "selection_fields": sorted(r.selection_fields),
                    "ip_port_mappings": dict(r.ip_port_mappings),
                    "health_checks": {c.vip: dict(c.options) for c in r.health_check},
                }
                for r in _owned(api, service)
            }

        return self._read(fn)  # type: ignore[no-any-return]

    def _read(self, fn: Any) -> Any:
        return read(self._api, fn)

    def close(self) -> None:
        self.db.stop()
