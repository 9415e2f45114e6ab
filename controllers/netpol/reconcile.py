"""Informer caches + NB replica → translation → one NB transaction, for the whole cluster at once.

Where it runs: one leader-elected controller (a Deployment, 2 replicas) writes the northbound
database. The objects it writes are cluster-wide (a port group spans every node's ports of the
pods it holds, an address set holds pods of every node); per-node writers would each need the
whole cluster's pods and would race on the same rows. ovn-northd and each node's ovn-controller
then distribute the result, as they do for the CNI's ports.

Every change (a policy, a pod's labels/ports/IPs, a namespace's labels, a logical port appearing
or going in the NB, someone else writing our rows there) queues the single key `cluster`; the
queue folds bursts into one reconcile, which recomputes the desired state from the caches
(milliseconds at hundreds of policies) and applies only the difference. The controller starts
only after every informer has synced and the NB replica is complete (the machinery and
PolicyNorthbound guarantee both), so a restart never applies a partial view: it finds its rows
by external_ids and changes only what differs.

A policy that is invalid (bad CIDR, unknown named port, ...) gets a Warning Event and is left as
OVN has it (nothing if it never applied); the pods it isolated stay isolated.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram

from controllers.machinery import EventRecorder, Kind, Store
from controllers.netpol.acl_logging import ANNOTATION, LogSetting, setting_or_off
from controllers.netpol.admin_status import AdminStatus
from controllers.netpol.admin_translate import AdminCache, NodeInfo, Outcome, translate_admin
from controllers.netpol.adminpolicy import (
    ADMIN_NETWORK_POLICIES,
    BASELINE_ADMIN_NETWORK_POLICIES,
    AdminPolicy,
    parse_admin,
)
from controllers.netpol.ovn_apply import ApplyStats, PortInfo
from controllers.netpol.policy import InvalidPolicy, NetworkPolicy, parse_policy
from controllers.netpol.translate import (
    DEFAULT_PRIORITIES,
    Desired,
    Frozen,
    Member,
    Priorities,
    TranslateMemo,
    translate,
)
from controllers.resources import Pod

log = logging.getLogger(__name__)
CLUSTER_KEY = "cluster"
TO_ACL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Northbound(Protocol):
    def ports(self) -> list[PortInfo]: ...
    def ports_version(self) -> int: ...
    def previous(self) -> dict[str, Frozen]: ...
    def apply(self, desired: Desired, keep: Any = (), release: Any = ()) -> ApplyStats: ...


class NetpolMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.objects = Gauge(
            "netpol_ovn_objects", "OVN rows this controller owns", ["table"], registry=registry
        )
        self.invalid = Gauge(
            "netpol_invalid_policies", "NetworkPolicies skipped as invalid", registry=registry
        )
        self.apply = Histogram("netpol_apply_seconds", "translate + NB transaction per reconcile",
                               registry=registry)  # fmt: skip
        self.to_acl = Histogram(
            "netpol_policy_to_acl_seconds",
            "A NetworkPolicy/Pod/Namespace change seen to its ACLs committed in NB",
            buckets=TO_ACL_BUCKETS,
            registry=registry,
        )
        self._pending: float | None = None

    def changed(self) -> None:
        """An informer saw a change the translation reads: timed until a reconcile commits it."""
        if self._pending is None:
            self._pending = time.monotonic()

    def take_pending(self) -> float | None:
        """At a reconcile's start: the oldest change it covers (changes after it wait for the next)."""
        pending, self._pending = self._pending, None
        return pending

    def committed(self, since: float | None) -> None:
        if since is not None:
            self.to_acl.observe(time.monotonic() - since)

    def not_committed(self, since: float | None) -> None:
        """The reconcile failed: its changes are still pending (from when they were first seen)."""
        if since is not None:
            self._pending = since if self._pending is None else min(since, self._pending)


class NetpolReconciler:
    def __init__(
        self,
        nb: Northbound,
        policies: Store,
        pods: Store,
        namespaces: Store,
        *,
        events: EventRecorder | None = None,
        priorities: Priorities = DEFAULT_PRIORITIES,
        metrics: NetpolMetrics | None = None,
        admin: AdminStores | None = None,
    ) -> None:
        self.nb, self.policies, self.pods, self.namespaces = nb, policies, pods, namespaces
        self.events, self.priorities, self.metrics = events, priorities, metrics
        self.admin = admin
        self._reported: dict[str, str] = {}
        self.last: ApplyStats | None = None
        self.memo = TranslateMemo()
        self._parsed: dict[str, tuple[str, NetworkPolicy | str]] = {}
        """policy key -> (the resourceVersion it was parsed at, the policy or why it is invalid)"""
        self._applied: tuple[tuple[object, ...], Desired, set[str]] | None = None
        """The inputs, desired state and skipped policies of the last reconcile that completed."""

    async def reconcile(self, key: str) -> None:
        since = self.metrics.take_pending() if self.metrics is not None else None
        try:
            await self._reconcile()
        except BaseException:
            if self.metrics is not None:
                self.metrics.not_committed(since)
            raise
        if self.metrics is not None:
            self.metrics.committed(since)

    def _inputs(self) -> tuple[object, ...]:
        """Versions of everything a translation reads (equal: the same desired state)."""
        admin = self.admin.generations() if self.admin is not None else ()
        stores = (self.policies, self.pods, self.namespaces)
        return (*(s.generation for s in stores), self.nb.ports_version(), *admin)

    async def _reconcile(self) -> None:
        started = time.monotonic()
        inputs = self._inputs()
        if self._applied is not None and self._applied[0] == inputs:
            # Only NB rows changed: the echo of our own last write, or someone else's write to our
            # rows. The desired state is the last one; the apply compares just the changed rows.
            self.last = await asyncio.to_thread(self.nb.apply, self._applied[1], self._applied[2])
            if self.metrics is not None:
                self.metrics.apply.observe(time.monotonic() - started)
            if self.last.total:
                log.info("repaired our rows: %d created, %d changed, %d deleted", self.last.created,
                         self.last.changed, self.last.deleted)  # fmt: skip
            return
        parsed, invalid = self._policies()
        ports = await asyncio.to_thread(self.nb.ports)
        members, labels = self._members(ports), self._namespace_labels()
        nodes = [ip for p in ports if p.management for ip in p.ips]
        logs = self._namespace_logging()
        desired, skipped = translate(parsed, members, labels, nodes, invalid=invalid, prio=self.priorities,
                                     logging=logs, memo=self.memo)  # fmt: skip
        if skipped:  # what OVN holds of the skipped policies keeps their pods isolated
            previous = await asyncio.to_thread(self.nb.previous)
            desired, skipped = translate(parsed, members, labels, nodes, invalid=invalid, previous=previous,
                                         prio=self.priorities, logging=logs)  # fmt: skip
        await self._report(skipped)
        outcomes: dict[str, Outcome] = {}
        if self.admin is not None:
            policies, outcomes = self.admin.parsed()
            outcomes |= translate_admin(
                desired,
                policies,
                members,
                labels,
                self.admin.nodes(),
                prio=self.priorities,
                cache=self.admin.cache,
            )
        release = {p.lsp for p in ports if p.held} & {m.lsp for m in members}  # the NB rebuilt: with policies
        self.last = await asyncio.to_thread(self.nb.apply, desired, set(skipped), release)
        if self.admin is not None:
            await self.admin.publish(outcomes)
        self._applied = (inputs, desired, set(skipped))
        if self.metrics is not None:
            self.metrics.apply.observe(time.monotonic() - started)
            self.metrics.invalid.set(len(skipped))
            self.metrics.objects.labels("acl").set(desired.acl_count())
            self.metrics.objects.labels("port_group").set(len(desired.port_groups))
            self.metrics.objects.labels("address_set").set(len(desired.address_sets))
        if self.last.total:
            log.info("applied %d policies: %d rows created, %d changed, %d deleted", len(parsed),
                     self.last.created, self.last.changed, self.last.deleted)  # fmt: skip

    def _policies(self) -> tuple[list[NetworkPolicy], dict[str, str]]:
        """Every policy parsed; one whose resourceVersion is the one it was parsed at is not parsed
        again (the API gives every write a new one; an object without one is always parsed)."""
        parsed, invalid = [], {}
        cache: dict[str, tuple[str, NetworkPolicy | str]] = {}
        for obj in self.policies.list():
            meta = obj.get("metadata", {})
            key, version = (
                f"{meta.get('namespace')}/{meta.get('name')}",
                str(meta.get("resourceVersion") or ""),
            )
            hit = self._parsed.get(key)
            if version and hit is not None and hit[0] == version:
                got = hit[1]
            else:
                try:
                    got = parse_policy(obj)
                except InvalidPolicy as e:
                    got = str(e)
            if version:
                cache[key] = (version, got)
            if isinstance(got, str):
                invalid[key] = got
            else:
                parsed.append(got)
        self._parsed = cache
        return parsed, invalid

    def _members(self, ports: list[PortInfo]) -> list[Member]:
        by_pod = {(p.namespace, p.pod): p for p in ports if p.namespace and p.pod}
        out = []
        for obj in self.pods.list():
            pod = Pod.from_dict(obj)
            port = by_pod.get((pod.namespace, pod.name))
            if port is None:  # not on the pod network (yet): nothing to filter
                continue
            out.append(Member(namespace=pod.namespace, name=pod.name, labels=pod.labels, lsp=port.lsp,
                              ips=port.ips or pod.ips, ports=pod.ports))  # fmt: skip
        return out

    def _namespace_labels(self) -> dict[str, Mapping[str, str]]:
        return {
            str(o["metadata"]["name"]): dict(o["metadata"].get("labels") or {})
            for o in self.namespaces.list()
        }

    def _namespace_logging(self) -> dict[str, LogSetting]:
        return {str(o["metadata"]["name"]): setting_or_off(o["metadata"].get("annotations"))
                for o in self.namespaces.list()}  # fmt: skip

    async def _report(self, skipped: dict[str, str]) -> None:
        for key, reason in skipped.items():
            if self._reported.get(key) == reason:
                continue
            log.warning("NetworkPolicy %s skipped: %s", key, reason)
            obj = self.policies.get_by_key(key)
            if self.events is not None and obj is not None:
                await self.events.record(obj, "Warning", "InvalidNetworkPolicy", "Translate",
                                         f"not applied (OVN keeps its previous state): {reason}")  # fmt: skip
        self._reported = dict(skipped)


class AdminStores:
    """The AdminNetworkPolicy, BaselineAdminNetworkPolicy and Node caches, and where their status goes."""

    def __init__(self, anps: Store, banps: Store, nodes: Store, status: AdminStatus | None) -> None:
        self.anps, self.banps, self._nodes, self.status = anps, banps, nodes, status
        self.cache = AdminCache()

    def _objects(self) -> list[tuple[Kind, dict[str, Any]]]:
        return [(ADMIN_NETWORK_POLICIES, o) for o in self.anps.list()] + [
            (BASELINE_ADMIN_NETWORK_POLICIES, o) for o in self.banps.list()
        ]

    def parsed(self) -> tuple[list[AdminPolicy], dict[str, Outcome]]:
        """The policies that parse, and the outcome of those that do not."""
        out, failed = [], {}
        for kind, obj in self._objects():
            try:
                out.append(parse_admin(obj, baseline=kind is BASELINE_ADMIN_NETWORK_POLICIES))
            except InvalidPolicy as e:
                failed[_key(kind, obj)] = Outcome(False, "SetupFailed", f"not applied: {e}")
        return out, failed

    def generations(self) -> tuple[int, ...]:
        return self.anps.generation, self.banps.generation, self._nodes.generation

    def nodes(self) -> list[NodeInfo]:
        out = []
        for o in self._nodes.list():
            addrs = (o.get("status") or {}).get("addresses") or []
            ips = tuple(a["address"] for a in addrs if a.get("type") in ("InternalIP", "ExternalIP"))
            out.append(NodeInfo(o["metadata"]["name"], dict(o["metadata"].get("labels") or {}), ips))
        return out

    async def publish(self, outcomes: Mapping[str, Outcome]) -> None:
        if self.status is None:
            return
        for kind, obj in self._objects():
            outcome = outcomes.get(_key(kind, obj))
            if outcome is not None:
                await self.status.publish(kind, obj, outcome)


def _key(kind: Kind, obj: Mapping[str, Any]) -> str:
    prefix = "banp" if kind is BASELINE_ADMIN_NETWORK_POLICIES else "anp"
    return f"{prefix}:{obj['metadata']['name']}"


def pod_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Only what the translation reads: labels, addresses, container ports."""
    a, b = Pod.from_dict(old), Pod.from_dict(new)
    return (a.labels, a.ips, a.ports) != (b.labels, b.ips, b.ports)


def labels_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return bool(old.get("metadata", {}).get("labels") != new.get("metadata", {}).get("labels"))


def logging_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The namespace's verdict-logging annotation (acl_logging.ANNOTATION)."""
    a, b = ((o.get("metadata", {}).get("annotations") or {}).get(ANNOTATION) for o in (old, new))
    return a != b


def node_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """A Node's labels or addresses (the ANP `nodes` peer); not its heartbeats."""

    def addresses(o: Mapping[str, Any]) -> Any:
        return (o.get("status") or {}).get("addresses")

    return labels_changed(old, new) or addresses(old) != addresses(new)
