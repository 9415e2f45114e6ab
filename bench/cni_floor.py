"""What an ADD cannot go below here, whatever the agent does: the executable's start-up and
OVN's own binding of a port.

- `executable_floor`: exec of `/bin/true`, `python -IS -c pass` on the shim's interpreter, and
  the real `prismnet` answering STATUS through the agent (start-up + one agent round trip).
- `binding_floor`: a pod port made the fastest way there is, with no agent: the veth exists
  and is up beforehand; the logical switch port and the OVS Interface (iface-id) are committed
  back to back over raw OVSDB JSON-RPC; then we wait, on a raw monitor, for ovs-vswitchd's
  ofport, ovn-controller's claim, and `external_ids:ovn-installed`. Milliseconds from the
  first commit sent.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class RawOvsdb(threading.Thread):
    """One JSON-RPC connection: monitors `tables`, timestamps every row update (monotonic)."""

    def __init__(self, remote: str, db: str, tables: dict[str, list[str]]) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(remote.removeprefix("unix:"))
        self.db, self.events = db, []  # type: list[tuple[float, str, dict[str, Any]]]
        self.updates = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._cv, self._next = threading.Condition(), 0
        monitor = {t: {"columns": cols} for t, cols in tables.items()}
        self._send({"method": "monitor", "id": "m", "params": [db, None, monitor]})
        self.start()

    def _send(self, msg: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(msg).encode())

    def run(self) -> None:
        buf, dec = "", json.JSONDecoder()
        while True:
            try:
                chunk = self.sock.recv(1 << 20).decode()
            except OSError:
                return
            if not chunk:
                return
            now, buf = time.monotonic(), buf + chunk
            while buf.strip():
                try:
                    msg, end = dec.raw_decode(buf.lstrip())
                except ValueError:
                    break
                buf = buf.lstrip()[end:]
                self._handle(msg, now)

    def _handle(self, msg: dict[str, Any], now: float) -> None:
        if msg.get("method") == "echo":
            self._send({"id": msg["id"], "result": msg["params"], "error": None})
        elif msg.get("method") == "update":
            self.updates += 1  # one per committed transaction that changed a monitored column
            for table, rows in msg["params"][1].items():
                self.events.extend((now, table, r["new"]) for r in rows.values() if r.get("new"))
        elif isinstance(msg.get("id"), int):
            with self._cv:
                self._replies[msg["id"]] = msg
                self._cv.notify_all()

    def transact(self, *ops: dict[str, Any]) -> list[Any]:
        with self._cv:
            self._next += 1
            i = self._next
        self._send({"method": "transact", "id": i, "params": [self.db, *ops]})
        with self._cv:
            if not self._cv.wait_for(lambda: i in self._replies, 10):
                raise TimeoutError(f"{self.db} transaction timed out")
            result: list[Any] = self._replies.pop(i)["result"]
        errors = [r for r in result if isinstance(r, dict) and "error" in r]
        if errors:
            raise RuntimeError(f"{self.db} transaction failed: {errors}")
        return result

    def uuid_of(self, table: str, name: str) -> str:
        rows = self.transact({"op": "select", "table": table, "where": [["name", "==", name]]})[0]["rows"]
        if not rows:
            raise LookupError(f"no {table} {name}")
        return str(rows[0]["_uuid"][1])

    def first(self, since: int, table: str, pred: Callable[[dict[str, Any]], bool]) -> float | None:
        return next((t for t, tb, row in self.events[since:] if tb == table and pred(row)), None)

    def close(self) -> None:
        self.sock.close()


@dataclass
class BindingFloor:
    milestones: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, ms: float) -> None:
        self.milestones.setdefault(name, []).append(ms)

    def median(self, name: str) -> float:
        return statistics.median(self.milestones[name])


def ids_have(row: dict[str, Any], key: str, value: str) -> bool:
    ids = row.get("external_ids")
    return isinstance(ids, list) and [key, value] in ids[1]


def binding_floor(endpoints: dict[str, str], switch: str, bridge: str, n: int = 20) -> BindingFloor:
    nb = RawOvsdb(endpoints["OVN_NB_DB"], "OVN_Northbound", {"Logical_Switch_Port": ["name", "up"]})
    sb = RawOvsdb(endpoints["OVN_SB_DB"], "OVN_Southbound", {"Port_Binding": ["logical_port", "chassis"]})
    ovs = RawOvsdb(endpoints["OVS_DB"], "Open_vSwitch", {"Interface": ["name", "ofport", "external_ids"]})
    floor, made = BindingFloor(), []
    try:
        ls, br = nb.uuid_of("Logical_Switch", switch), ovs.uuid_of("Bridge", bridge)
        for k in range(n):
            made.append(k)
            _one_binding(nb, sb, ovs, ls, br, k, floor)
    finally:
        for k in made:
            _remove_binding(nb, ovs, ls, br, k)
        for c in (nb, sb, ovs):
            c.close()
    return floor


def lsp_ops(lsp: str, address: str, switch_uuid: str) -> tuple[dict[str, Any], ...]:
    """NB operations: a logical switch port with `address` (and its port security) on the switch."""
    return (
        {
            "op": "insert",
            "table": "Logical_Switch_Port",
            "uuid-name": "p",
            "row": {"name": lsp, "addresses": address, "port_security": address},
        },
        {
            "op": "mutate",
            "table": "Logical_Switch",
            "where": [["_uuid", "==", ["uuid", switch_uuid]]],
            "mutations": [["ports", "insert", ["named-uuid", "p"]]],
        },
    )


def ovs_port_ops(host_if: str, lsp: str, bridge_uuid: str) -> tuple[dict[str, Any], ...]:
    """OVS operations: port + interface `host_if` bound to `lsp` (iface-id) on the bridge."""
    return (
        {
            "op": "insert",
            "table": "Interface",
            "uuid-name": "i",
            "row": {"name": host_if, "external_ids": ["map", [["iface-id", lsp]]]},
        },
        {
            "op": "insert",
            "table": "Port",
            "uuid-name": "p",
            "row": {"name": host_if, "interfaces": ["named-uuid", "i"]},
        },
        {
            "op": "mutate",
            "table": "Bridge",
            "where": [["_uuid", "==", ["uuid", bridge_uuid]]],
            "mutations": [["ports", "insert", ["named-uuid", "p"]]],
        },
    )


def _names(k: int) -> tuple[str, str, str, str, str]:
    ip = f"10.95.255.{10 + k}"
    mac = "0a:58:0a:5f:ff:%02x" % (10 + k)
    return f"pnfloor{k}", f"cnifloor-{k}", f"floor-lsp-{k}", ip, mac


def _one_binding(
    nb: RawOvsdb, sb: RawOvsdb, ovs: RawOvsdb, ls: str, br: str, k: int, floor: BindingFloor
) -> None:
    host, netns, lsp, ip, mac = _names(k)
    subprocess.run(["ip", "netns", "add", netns], check=True)
    subprocess.run(
        ["ip", "link", "add", host, "mtu", "1400", "up", "type", "veth", "peer", "eth0", "netns", netns],
        check=True,
    )
    subprocess.run(["ip", "-n", netns, "link", "set", "eth0", "address", mac, "up"], check=True)
    time.sleep(0.2)  # let ovs-vswitchd settle on the new link before the clock starts
    marks = len(nb.events), len(sb.events), len(ovs.events)
    t0 = time.monotonic()
    nb.transact(*lsp_ops(lsp, f"{mac} {ip}", ls))
    t_nb = time.monotonic()
    ovs.transact(*ovs_port_ops(host, lsp, br))
    t_ovs = time.monotonic()
    deadline = t0 + 10
    installed = None
    while installed is None and time.monotonic() < deadline:
        time.sleep(0.001)
        installed = ovs.first(
            marks[2], "Interface", lambda r: r.get("name") == host and ids_have(r, "ovn-installed", "true")
        )
    if installed is None:
        raise TimeoutError(f"{lsp} was not installed within 10 s")
    ofport = ovs.first(
        marks[2], "Interface", lambda r: r.get("name") == host and isinstance(r.get("ofport"), int)
    )
    binding = sb.first(marks[1], "Port_Binding", lambda r: r.get("logical_port") == lsp)
    claimed = sb.first(
        marks[1], "Port_Binding", lambda r: bool(r.get("chassis")) and r.get("chassis") != ["set", []]
    )
    for name, at in (
        ("NB commit", t_nb),
        ("OVS commit", t_ovs),
        ("Port_Binding made (northd)", binding),
        ("ofport (ovs-vswitchd)", ofport),
        ("claimed (ovn-controller)", claimed),
        ("ovn-installed", installed),
    ):
        if at is not None:
            floor.add(name, (at - t0) * 1000)


def _remove_binding(nb: RawOvsdb, ovs: RawOvsdb, ls: str, br: str, k: int) -> None:
    host, netns, lsp, _, _ = _names(k)
    for db, table, name, parent, uuid, column in (
        (ovs, "Port", host, "Bridge", br, "ports"),
        (nb, "Logical_Switch_Port", lsp, "Logical_Switch", ls, "ports"),
    ):
        try:
            rows = db.transact({"op": "select", "table": table, "where": [["name", "==", name]]})[0]["rows"]
            for row in rows:
                db.transact(
                    {
                        "op": "mutate",
                        "table": parent,
                        "where": [["_uuid", "==", ["uuid", uuid]]],
                        "mutations": [[column, "delete", row["_uuid"]]],
                    }
                )
        except (RuntimeError, TimeoutError, OSError) as e:
            print(f"    cleanup of {name} failed: {e}")
    subprocess.run(["ip", "link", "del", host], capture_output=True)
    subprocess.run(["ip", "netns", "del", netns], capture_output=True)


def _median_ms(argv: list[str], env: dict[str, str], stdin: bytes, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, input=stdin, capture_output=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def executable_floor(exe: Path, agent_socket: str, n: int = 60) -> dict[str, float]:
    """Median ms of: exec alone, the shim's interpreter doing nothing (and importing _json or json),
    prismnet STATUS."""
    python = exe.read_text().splitlines()[0].removeprefix("#!").split()[0]
    env = {"PATH": "/usr/bin:/bin"}
    status_env = {**env, "CNI_COMMAND": "STATUS", "CNI_PATH": str(exe.parent)}
    netconf = {"cniVersion": "1.1.0", "name": "prismnet", "type": "prismnet", "agentSocket": agent_socket}
    conf = json.dumps(netconf).encode()
    py = [python, "-IS", "-c"]
    return {
        "exec /bin/true": _median_ms(["/bin/true"], env, b"", n),
        f"{python} -IS -c pass": _median_ms([python, "-IS", "-c", "pass"], env, b"", n),
        "  ... -c 'import _json' (reads agentSocket)": _median_ms([*py, "import _json"], env, b"", n),
        "  ... -c 'import json' (not imported)": _median_ms([*py, "import json"], env, b"", n),
        "prismnet STATUS (start-up + agent round trip)": _median_ms([str(exe)], status_env, conf, n),
    }
