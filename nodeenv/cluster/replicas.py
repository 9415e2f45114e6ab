"""The cluster-wide controllers' replicas as an operator sees them (tests and the bench).

- Who leads: each controller's Lease (kube-system/<program>) names its holder, `<program>-<node>_<uuid>`
  (POD_NAME plus a random suffix, as client-go's callers make it), so the holder's node is known.
- A handover: after the leader's node is killed, the seconds until the Lease names the replica on
  another node (`wait_handovers`), beside the Lease's duration.
- Who wrote: the API double's audit log (nodeenv/kubeapi/auditlog.py) names each request's client.
  A replica is host-network on its node, so its source IP is its node's address, and its user agent
  names its program (`<program>/v<version> ...`). `writes_while_not_leading` walks the log in order,
  following each Lease's holder through the successful Lease writes, and returns every other write
  (create, update, patch, delete) a replica made while it was not the holder.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodeenv.cluster import faults
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.control import CONTROLLERS, LEASE_NAMESPACE
from nodeenv.daemons import DaemonError
from nodeenv.kubelet.apiclient import KubeClient

LEASES = "/apis/coordination.k8s.io/v1"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
Event = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Holder:
    program: str
    identity: str
    """holderIdentity ("" when nobody holds it)"""
    node: str
    """the node of the replica that holds it ("" when nobody or not one of ours)"""
    lease_duration: float


def replica_node(program: str, identity: str) -> str:
    """`<program>-<node>_<uuid>` -> node ("" for another form)."""
    pod, _, _ = identity.partition("_")
    return pod.removeprefix(f"{program}-") if pod.startswith(f"{program}-") else ""


def lease_holder(client: KubeClient, program: str) -> Holder:
    lease = client.get(LEASES, "leases", LEASE_NAMESPACE, program) or {}
    spec = lease.get("spec") or {}
    identity = spec.get("holderIdentity") or ""
    return Holder(
        program, identity, replica_node(program, identity), float(spec.get("leaseDurationSeconds") or 0)
    )


def holders(client: KubeClient, programs: Iterable[str] = CONTROLLERS) -> dict[str, Holder]:
    return {p: lease_holder(client, p) for p in programs}


@dataclass(frozen=True, slots=True)
class Handover:
    program: str
    before: str
    after: str
    seconds: float
    """from the kill until the Lease named the other replica"""
    lease_duration: float

    def line(self) -> str:
        return (f"{self.program}: {self.before} -> {self.after} {self.seconds:.1f} s after {self.before} "
                f"was killed (lease duration {self.lease_duration:g} s)")  # fmt: skip


def wait_handovers(
    client: KubeClient, before: Mapping[str, Holder], victim: str, killed_at: float, timeout: float = 40
) -> list[Handover]:
    """For every controller whose Lease was held on node `victim` (killed at `killed_at`,
    time.monotonic()), wait until another node's replica holds it; the handovers."""
    waiting = {p: h for p, h in before.items() if h.node == victim}
    done: list[Handover] = []
    deadline = killed_at + timeout
    while waiting:
        for program, old in list(waiting.items()):
            now = lease_holder(client, program)
            if now.node and now.node != victim:
                done.append(
                    Handover(program, victim, now.node, time.monotonic() - killed_at, old.lease_duration)
                )
                del waiting[program]
        if waiting and time.monotonic() > deadline:
            raise DaemonError(
                f"no replica took over {sorted(waiting)} within {timeout:.0f} s of killing {victim}"
            )
        time.sleep(0.05)
    return done


def kill_leaders_node(
    cluster: Cluster, client: KubeClient, program: str = "fiberlb-controller"
) -> tuple[ClusterNode, ClusterNode, list[Handover]]:
    """Kill the node whose replica holds `program`'s Lease (every daemon SIGKILLed,
    nodeenv/cluster/faults.py) and wait until the other replicas hold every Lease that was held
    there: the node killed, the node that took over, and the handovers."""
    before = holders(client)
    victim = next((n for n in cluster.nodes if n.name == before[program].node), None)
    if victim is None:
        raise DaemonError(f"{program}'s Lease is not held by a replica on a node: {before[program]}")
    others = [n for n in cluster.controller_nodes() if n is not victim]
    killed_at = faults.kill_node(victim)
    handed = wait_handovers(client, before, victim.name, killed_at)
    survivor = next(n for n in others if n.name == handed[0].after)
    return victim, survivor, handed


def replica_of(event: Event, nodes_by_address: Mapping[str, str]) -> tuple[str, str] | None:
    """(program, node) of the controller replica that sent `event`, or None (another client)."""
    agent, ips = str(event.get("userAgent") or ""), event.get("sourceIPs") or []
    program = agent.partition("/")[0]
    node = nodes_by_address.get(str(ips[0])) if isinstance(ips, list) and ips else None
    return (program, node) if program in CONTROLLERS and node else None


def _lease_write(event: Event, program: str) -> bool:
    ref = event.get("objectRef") or {}
    assert isinstance(ref, dict)
    return ref.get("resource") == "leases" and ref.get("name") == program and event.get("verb") in WRITES


def _succeeded(event: Event) -> bool:
    status = event.get("responseStatus") or {}
    assert isinstance(status, dict)
    return 200 <= int(status.get("code") or 0) < 300


def writes_while_not_leading(events: Iterable[Event], nodes_by_address: Mapping[str, str]) -> list[str]:
    """Every write (other than to its own Lease) by a controller replica that was not, at that point
    of the log, the last to write its Lease successfully; each described."""
    holder: dict[str, str] = {}
    out = []
    for e in events:
        who = replica_of(e, nodes_by_address)
        if who is None:
            continue
        program, node = who
        if _lease_write(e, program):
            if _succeeded(e):
                holder[program] = node
        elif e.get("verb") in WRITES and holder.get(program) != node:
            out.append(f"{program} on {node} (leader: {holder.get(program) or 'none'}) {e.get('verb')} "
                       f"{e.get('requestURI')} at {e.get('stageTimestamp')}")  # fmt: skip
    return out


def requests_by_replica(
    events: Iterable[Event], nodes_by_address: Mapping[str, str]
) -> dict[tuple[str, str], Counter[str]]:
    """(program, node) -> how many requests of each `verb resource` it made."""
    out: dict[tuple[str, str], Counter[str]] = {}
    for e in events:
        who = replica_of(e, nodes_by_address)
        if who is not None:
            ref = e.get("objectRef") or {}
            assert isinstance(ref, dict)
            out.setdefault(who, Counter())[f"{e.get('verb')} {ref.get('resource', '')}"] += 1
    return out


def addresses(cluster: Cluster, extra: Iterable[ClusterNode] = ()) -> dict[str, str]:
    """Underlay address -> node name, for the cluster's nodes (and nodes that left, `extra`)."""
    return {n.address: n.name for n in [*cluster.nodes, *extra]}
