"""A floor that is a floor: pod ports written the fastest way a client can, and where the time
from the NB commit to `ovn-installed` goes (issue 33 item 0).

- `IdlFloor`: one ovsdbapp IDL connection to the NB and one to the node's OVS database
  (`ovnaccess.connect`, as the agent connects), kept open across ports. Ports that are waiting at
  the same moment go into ONE NB transaction and then ONE OVS transaction (group commit: the most
  an agent could batch, since each pod's ADD is its own call). No process per port, no schema
  download per port, no IPAM, veths made beforehand: nothing of ours is on the path.
- `StageClock`: raw OVSDB monitors (`bench.cni_floor.RawOvsdb`, no IDL of ours) on the NB
  (Logical_Switch_Port), the SB (Port_Binding) and the node's OVS (Interface) note, per logical
  port, when each daemon's write became visible. It does not care who wrote the port, so the
  same stages are read for the agent's ADDs and for the floor's ports.

Stages of one port (ms):
  northd          NB row seen -> SB Port_Binding made (ovn-northd's recompute and SB write)
  vswitchd attach OVS Interface seen -> its ofport (ovs-vswitchd adding the port)
  claim           Port_Binding and Interface both there -> Port_Binding.chassis set (ovn-controller;
                  a claim committed after ovn-installed, as through a RAFT SB, ends at ovn-installed)
  flows           claim and ofport both there -> `ovn-installed` (ovn-controller computes the port's
                  flows, ovs-vswitchd installs them and answers the barrier; the two are not told
                  apart from outside)
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from bench.cni_floor import RawOvsdb
from bench.stats import pct
from ovnaccess.commands import Command, by_name
from ovnaccess.connection import Ovsdb, connect

if TYPE_CHECKING:
    from bench.cni_batch_floor import FloorPort

T = TypeVar("T")
SB_MONITOR = {"Port_Binding": ["logical_port", "chassis"]}
STAGES = ("northd", "vswitchd attach", "claim", "flows")
NB_TABLES = {
    "Logical_Switch": ["name", "ports"],
    "Logical_Switch_Port": ["name", "addresses", "port_security"],
}
OVS_TABLES = {
    "Bridge": ["name", "ports"],
    "Port": ["name", "interfaces"],
    "Interface": ["name", "external_ids"],
}


class GroupCommit(Generic[T]):
    """Callers block in `__call__(item)` until `write(items)` has committed their item together
    with every other item that was waiting when the writer thread picked them up."""

    def __init__(self, write: Callable[[list[T]], None]) -> None:
        self._write = write
        self._q: queue.Queue[tuple[T, Future[None]] | None] = queue.Queue()
        self.sizes: list[int] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def __call__(self, item: T) -> None:
        done: Future[None] = Future()
        self._q.put((item, done))
        done.result(timeout=60)

    def _run(self) -> None:
        while (first := self._q.get()) is not None:
            batch = [first]
            while True:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                batch.append(nxt)
            self.sizes.append(len(batch))
            try:
                self._write([item for item, _ in batch])
            except Exception as e:  # handed to every waiting caller
                for _, f in batch:
                    f.set_exception(e)
            else:
                for _, f in batch:
                    f.set_result(None)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(5)


class _AddLsps(Command):  # type: ignore[misc]
    """Insert each port and reference it from its switch: the least an NB write of a pod port is."""

    def __init__(self, api: Any, ports: list[FloorPort]) -> None:
        super().__init__(api)
        self.ports = ports

    def run_idl(self, txn: Any) -> None:
        for p in self.ports:
            row = txn.insert(self.api.tables["Logical_Switch_Port"])
            row.name, row.addresses, row.port_security = p.lsp, [f"{p.mac} {p.ip}"], [f"{p.mac} {p.ip}"]
            by_name(self.api, "Logical_Switch", p.switch).addvalue("ports", row)


class _AddOvsPorts(Command):  # type: ignore[misc]
    def __init__(self, api: Any, bridge: str, ports: list[FloorPort]) -> None:
        super().__init__(api)
        self.bridge, self.ports = bridge, ports

    def run_idl(self, txn: Any) -> None:
        br = by_name(self.api, "Bridge", self.bridge)
        for p in self.ports:
            iface = txn.insert(self.api.tables["Interface"])
            iface.name, iface.external_ids = p.host_if, {"iface-id": p.lsp}
            port = txn.insert(self.api.tables["Port"])
            port.name, port.interfaces = p.host_if, [iface]
            br.addvalue("ports", port)


class _DelPorts(Command):  # type: ignore[misc]
    def __init__(self, api: Any, table: str, parent: str, column: str, names: list[tuple[str, str]]) -> None:
        super().__init__(api)
        self.table, self.parent, self.column, self.names = table, parent, column, names

    def run_idl(self, txn: Any) -> None:
        for name, parent in self.names:
            row, owner = by_name(self.api, self.table, name), by_name(self.api, self.parent, parent)
            if row is not None and owner is not None:
                owner.delvalue(self.column, row)


class IdlFloor:
    """Long-lived IDL connections to the NB and to one node's OVS db; `bind(port)` from many
    threads at once, each port committed in a group with the others waiting then."""

    def __init__(self, nb_remote: str, ovs_remote: str, bridge: str) -> None:
        self.nb: Ovsdb = connect(nb_remote, "OVN_Northbound", NB_TABLES)
        self.ovs: Ovsdb = connect(ovs_remote, "Open_vSwitch", OVS_TABLES)
        self.bridge = bridge
        self.nb_commit: GroupCommit[FloorPort] = GroupCommit(
            lambda ps: _AddLsps(self.nb.api, ps).execute(check_error=True)
        )
        self.ovs_commit: GroupCommit[FloorPort] = GroupCommit(
            lambda ps: _AddOvsPorts(self.ovs.api, bridge, ps).execute(check_error=True)
        )

    def bind(self, p: FloorPort) -> None:
        self.nb_commit(p)
        self.ovs_commit(p)

    def unbind(self, ports: list[FloorPort]) -> None:
        _DelPorts(self.ovs.api, "Port", "Bridge", "ports", [(p.host_if, self.bridge) for p in ports]).execute(
            check_error=True
        )
        _DelPorts(
            self.nb.api, "Logical_Switch_Port", "Logical_Switch", "ports", [(p.lsp, p.switch) for p in ports]
        ).execute(check_error=True)

    def close(self) -> None:
        for g in (self.nb_commit, self.ovs_commit):
            g.close()
        for db in (self.nb, self.ovs):
            db.stop()


def _ids(row: dict[str, Any]) -> dict[str, str]:
    ids = row.get("external_ids")
    return dict(ids[1]) if isinstance(ids, list) and ids[0] == "map" else {}


def _set(value: Any) -> bool:
    """An OVSDB optional column holds something (not ["set", []])."""
    return bool(value) and value != ["set", []]


@dataclass
class PortTimes:
    """Monotonic seconds at which each step of one logical port was seen (None: not yet)."""

    nb: float | None = None
    pb: float | None = None
    claimed: float | None = None
    iface: float | None = None
    ofport: float | None = None
    installed: float | None = None

    def stages(self) -> dict[str, float] | None:
        """The four stages in ms, or None while the port is not installed."""
        nb, pb, claimed, iface, ofport, installed = (
            self.nb,
            self.pb,
            self.claimed,
            self.iface,
            self.ofport,
            self.installed,
        )
        if nb is None or pb is None or iface is None or ofport is None or installed is None:
            return None
        # ovn-controller installs a port's flows while its claim is still being committed: through
        # a RAFT SB the claim can show after ovn-installed, when it was not on the way to it
        claimed = installed if claimed is None else min(claimed, installed)
        return {
            "northd": (pb - nb) * 1000,
            "vswitchd attach": (ofport - iface) * 1000,
            "claim": max(0.0, claimed - max(pb, iface)) * 1000,
            "flows": (installed - max(claimed, ofport)) * 1000,
        }


class StageClock:
    """Raw monitors (unix sockets) on the NB, the SB (each member of a cluster's remote list) and
    one or more nodes' OVS dbs; `times[lsp]` holds the earliest time each step was seen."""

    def __init__(self, nb: str, sb: str, ovs: Iterable[str]) -> None:
        self.times: dict[str, PortTimes] = {}
        self._lock = threading.Lock()
        self._dbs = [  # every member of a cluster's list: a step counts when the first one shows it
            *(RawOvsdb(m, "OVN_Northbound", {"Logical_Switch_Port": ["name"]}) for m in nb.split(",")),
            *(RawOvsdb(m, "OVN_Southbound", SB_MONITOR) for m in sb.split(",")),
            *(RawOvsdb(o, "Open_vSwitch", {"Interface": ["name", "ofport", "external_ids"]}) for o in ovs),
        ]
        self._seen = [0] * len(self._dbs)
        self._iface_lsp: dict[str, str] = {}
        self.cid_lsp: dict[str, str] = {}
        """Container id (the agent's `prismnet.container-id`) -> its logical port."""

    def _note(self, lsp: str, step: str, at: float) -> None:
        t = self.times.setdefault(lsp, PortTimes())
        seen = getattr(t, step)
        if seen is None or at < seen:
            setattr(t, step, at)

    def refresh(self) -> None:
        with self._lock:
            for i, db in enumerate(self._dbs):
                events = db.events[self._seen[i] :]
                self._seen[i] += len(events)
                for at, table, row in events:
                    self._one(at, table, row)

    def _one(self, at: float, table: str, row: dict[str, Any]) -> None:
        if table == "Logical_Switch_Port" and "name" in row:
            self._note(row["name"], "nb", at)
        elif table == "Port_Binding" and "logical_port" in row:
            self._note(row["logical_port"], "pb", at)
            if _set(row.get("chassis")):
                self._note(row["logical_port"], "claimed", at)
        elif table == "Interface":
            ids = _ids(row)
            lsp = ids.get("iface-id") or self._iface_lsp.get(row.get("name", ""), "")
            if not lsp:
                return
            self._iface_lsp[row.get("name", "")] = lsp
            if "prismnet.container-id" in ids:
                self.cid_lsp[ids["prismnet.container-id"]] = lsp
            self._note(lsp, "iface", at)
            if isinstance(row.get("ofport"), int) and row["ofport"] > 0:
                self._note(lsp, "ofport", at)
            if ids.get("ovn-installed") == "true":
                self._note(lsp, "installed", at)

    def ours(self) -> set[str]:
        """The logical ports the agent made so far (their Interface names a container id)."""
        self.refresh()
        return set(self.cid_lsp.values())

    def forget(self, prefix: str) -> None:
        """Drop what was seen of the ports named `prefix`*: a later batch reuses their names."""
        with self._lock:
            for lsp in [k for k in self.times if k.startswith(prefix)]:
                del self.times[lsp]
            for name in [k for k, v in self._iface_lsp.items() if v.startswith(prefix)]:
                del self._iface_lsp[name]

    def installed_at(self, lsp: str, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.refresh()
            t = self.times.get(lsp)
            if t is not None and t.installed is not None:
                return t.installed
            time.sleep(0.002)
        raise TimeoutError(f"{lsp} was not installed within {timeout:.0f} s")

    def close(self) -> None:
        for db in self._dbs:
            db.close()


@dataclass
class StageRun:
    """One batch of ports: total ms per port (its start -> ovn-installed) and each stage's ms."""

    total: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STAGES})
    before_nb: list[float] = field(default_factory=list)
    """start -> NB row seen: the writer's own part (for ours: shim, IPAM, the agent's NB write)."""
    slowest: dict[str, float] = field(default_factory=dict)
    """The stages' mean ms over the ports at or above the p99 total."""
    wall: float = 0.0

    @property
    def per_s(self) -> float:
        return len(self.total) / self.wall if self.wall else float("nan")

    def p99_stage(self) -> str:
        """The stage that holds the p99: the largest share of the slowest ports' time."""
        return max(self.slowest, key=lambda k: self.slowest[k]) if self.slowest else "n/a"


def stage_run(clock: StageClock, started: dict[str, float], wall: float) -> StageRun:
    """`started`: lsp -> monotonic start of its write (the ADD's start, for ours)."""
    clock.refresh()
    run, per_port = StageRun(wall=wall), []
    for lsp, t0 in started.items():
        t = clock.times.get(lsp)
        st = t.stages() if t else None
        if t is None or st is None or t.installed is None or t.nb is None:
            continue
        total = (t.installed - t0) * 1000
        run.total.append(total)
        run.before_nb.append((t.nb - t0) * 1000)
        per_port.append((total, {"before NB": (t.nb - t0) * 1000, **st}))
        for k, v in st.items():
            run.stages[k].append(v)
    cut = pct(run.total, 99)
    slow = [s for tot, s in per_port if tot >= cut]
    run.slowest = {k: sum(s[k] for s in slow) / len(slow) for k in slow[0]} if slow else {}
    return run


def nb_to_installed(clock: StageClock, lsps: Iterable[str]) -> StageRun:
    """The stages of ports someone else wrote (the agent's), timed from their NB row on."""
    clock.refresh()
    return stage_run(
        clock, {lsp: t.nb for lsp in lsps if (t := clock.times.get(lsp)) and t.nb is not None}, 0.0
    )


def floor_batch(
    floor: IdlFloor, clock: StageClock, ports: list[FloorPort], conc: int
) -> tuple[StageRun, list[int]]:
    """Bind `ports` at concurrency `conc` through `floor`; each port timed until ovn-installed.
    Also returns the NB transactions' group sizes."""
    started: dict[str, float] = {}
    mark = len(floor.nb_commit.sizes)

    def one(p: FloorPort) -> None:
        started[p.lsp] = time.monotonic()
        floor.bind(p)
        clock.installed_at(p.lsp)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as ex:
        list(ex.map(one, ports))
    return stage_run(clock, started, time.perf_counter() - t0), floor.nb_commit.sizes[mark:]


def fmt_stages(run: StageRun) -> str:
    return "  ".join(f"{k} {pct(v, 50):.0f}/{pct(v, 99):.0f}" for k, v in run.stages.items())


def print_beside(label_runs: list[tuple[str, StageRun]], indent: str = "    ") -> None:
    """Ours and the floor, one line each: total p50/p99, stages p50/p99, the stage of the p99."""
    for label, run in label_runs:
        print(
            f"{indent}{label:24s} start->ovn-installed p50 {pct(run.total, 50):6.1f}"
            f" p99 {pct(run.total, 99):6.1f}"
            f" ms  before NB p50/p99 {pct(run.before_nb, 50):.0f}/{pct(run.before_nb, 99):.0f}"
        )
        print(
            f"{indent}  stages p50/p99 ms: {fmt_stages(run)}; the p99 is held by: {run.p99_stage()}"
            f" ({run.slowest.get(run.p99_stage(), float('nan')):.0f} ms of the slowest ports')"
        )
