"""NetworkPolicies + pods + namespaces → the OVN port groups, address sets and ACLs wanted (pure).

Shape (the one ovn-kubernetes uses too; written here from the NetworkPolicy and OVN NB specs):

- per policy, a port group of the logical ports of the pods it selects, carrying one
  `allow-related` ACL per rule (`to-lport` for ingress, `from-lport` applied after the load
  balancer for egress, so a Service's traffic is judged by its backend pod);
- per rule, an address set of the IPv4 addresses of its peer pods (pod and/or namespace
  selector), and per resolved named port an address set of the pods that name it; ipBlocks
  are written into the match;
- per namespace and direction, a port group of every pod isolated in that direction, with
  a lower-priority `drop` ACL (default deny) and an `allow-related` ACL for the nodes'
  management ports (kubelet probes);
so pod membership lives in port groups and address sets, and the ACL count grows with
rules and namespaces, never with pods.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controllers.netpol.acl_logging import OFF, AclLog, LogSetting, acl_log, reference
from controllers.netpol.policy import Direction, NetworkPolicy, Peer, PortSpec, Rule
from controllers.resources import ContainerPort

CLUSTER_OWNER = "cluster"
NODES_SET = "pn_np_nodes"
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    """A pod that has a logical port: what the translation needs of it."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    lsp: str
    ips: tuple[str, ...]
    ports: tuple[ContainerPort, ...] = ()


@dataclass(frozen=True, slots=True)
class Acl:
    direction: str
    priority: int
    match: str
    action: str
    after_lb: bool = False
    ref: str = ""
    """The admin policy rule it comes from (external_ids k8shost.netpol.ref): anp:NAME/ingress/0/Deny/RULE."""
    log: AclLog | None = None
    """Verdict logging (acl_logging): the ACL's name, severity and meter; None: not logged."""


@dataclass(frozen=True, slots=True)
class PortGroup:
    name: str
    owner: str
    """The policy key ("ns/name") or "namespace:<ns>"; the unit of freezing."""
    ports: frozenset[str]
    """Logical switch port names."""
    acls: frozenset[Acl]
    types: str = ""
    """The directions the group isolates, comma-separated (kept in external_ids)."""


@dataclass(frozen=True, slots=True)
class AddressSet:
    name: str
    owner: str
    addresses: frozenset[str]


@dataclass(frozen=True, slots=True)
class Frozen:
    """A policy left as it is in OVN (now invalid): its isolation still counts."""

    key: str
    namespace: str
    types: frozenset[str]
    lsps: frozenset[str]


@dataclass(frozen=True, slots=True)
class Priorities:
    allow: int = 1001
    deny: int = 1000


DEFAULT_PRIORITIES = Priorities()


@dataclass
class Desired:
    port_groups: dict[str, PortGroup] = field(default_factory=dict)
    address_sets: dict[str, AddressSet] = field(default_factory=dict)

    def acl_count(self) -> int:
        return sum(len(pg.acls) for pg in self.port_groups.values())


class UnknownNamedPort(ValueError):
    """A named port no pod it applies to declares: the policy is skipped."""


def ident(prefix: str, key: str) -> str:
    """An OVN identifier (usable as @pg / $as in a match) for any key."""
    return f"{prefix}_{hashlib.sha1(key.encode()).hexdigest()[:16]}"


def policy_group(key: str) -> str:
    return ident("pn_np", key)


def deny_group(namespace: str, direction: Direction) -> str:
    return ident("pn_npd", namespace) + ("_in" if direction == "Ingress" else "_eg")


class _World:
    """Pods indexed by namespace, and namespace labels (with the name label the API adds)."""

    def __init__(self, members: Sequence[Member], namespaces: Mapping[str, Mapping[str, str]]) -> None:
        self.by_ns: dict[str, list[Member]] = defaultdict(list)
        self.v4: dict[str, list[str]] = {}
        """Each member's IPv4 addresses by logical port, parsed once (not once per rule)."""
        for m in members:
            self.by_ns[m.namespace].append(m)
            self.v4[m.lsp] = _v4(m.ips)
        self.ns_labels = {n: {NAME_LABEL: n, **labels} for n, labels in namespaces.items()}

    def selected(self, p: NetworkPolicy) -> list[Member]:
        return [m for m in self.by_ns.get(p.namespace, ()) if p.pod_selector.matches(m.labels)]

    def peers(self, namespace: str, peer: Peer) -> list[Member]:
        if peer.ip_block is not None:
            return []
        if peer.namespace_selector is None:
            spaces = [namespace]
        else:
            spaces = [n for n, lab in self.ns_labels.items() if peer.namespace_selector.matches(lab)]
        sel = peer.pod_selector
        return [m for n in spaces for m in self.by_ns.get(n, ()) if sel is None or sel.matches(m.labels)]

    def everyone(self) -> list[Member]:
        return [m for ms in self.by_ns.values() for m in ms]


@dataclass
class _Assembly:
    """A memoized translation put together: every policy's port group and address sets, the
    policies skipped, and the pods each namespace isolates per direction. The next translation in
    the same world patches it with the policies that came, changed or went (and the isolation of
    their namespaces) and copies it out: one policy changed among a thousand costs that policy."""

    had: dict[str, tuple[NetworkPolicy, LogSetting]] = field(default_factory=dict)
    """policy key -> the policy and its namespace's logging, as translated"""
    groups: dict[str, PortGroup] = field(default_factory=dict)
    sets: dict[str, AddressSet] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    made: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    """policy key -> the names of its port group and address sets (a skipped policy has none)"""
    by_ns: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    isolated: dict[tuple[str, Direction], set[str]] = field(default_factory=dict)

    def forget(self, key: str) -> None:
        p, _ = self.had.pop(key)
        self.by_ns[p.namespace].discard(key)
        self.skipped.pop(key, None)
        group, sets = self.made.pop(key, ("", []))
        self.groups.pop(group, None)
        for name in sets:
            self.sets.pop(name, None)

    def add(self, world: _World, p: NetworkPolicy, prio: Priorities, logs: LogSetting) -> None:
        self.had[p.key] = (p, logs)
        self.by_ns[p.namespace].add(p.key)
        try:
            pg, sets = _policy(world, p, prio, logs)
        except UnknownNamedPort as e:
            self.skipped[p.key] = str(e)
            return
        self.groups[pg.name] = pg
        self.sets.update((s.name, s) for s in sets)
        self.made[p.key] = (pg.name, [s.name for s in sets])

    def isolate(self, ns: str) -> None:
        """The pods of `ns` isolated per direction, again from its policies (not the skipped)."""
        for d in ("Ingress", "Egress"):
            self.isolated.pop((ns, d), None)
        for key in self.by_ns.get(ns, ()):
            if key in self.skipped:
                continue
            p, group = self.had[key][0], self.groups[self.made[key][0]]
            for d in p.types:
                self.isolated.setdefault((ns, d), set()).update(group.ports)


@dataclass
class TranslateMemo:
    """The last translation, kept while the pods, namespaces and priorities it was computed against
    are the same: a policy created, changed or deleted translates that policy alone, and the
    others' port groups and address sets are the very objects of the last reconcile (so the apply's
    comparison with what it wrote last is cheap too); a pod or namespace change translates them all.
    A policy is looked up by its key, then compared (a parsed policy the caller kept is the same
    object: comparing it costs nothing, hashing it would walk all of it)."""

    world: tuple[list[Member], dict[str, dict[str, str]], Priorities] | None = None
    assembly: _Assembly = field(default_factory=_Assembly)
    deny: dict[tuple[str, Direction], tuple[frozenset[str], LogSetting, PortGroup]] = field(
        default_factory=dict
    )
    """(namespace, direction) -> the pods and logging its default-deny group was made for, and it"""
    hits: int = 0
    """Policies reused as they were, over every translation."""

    def use(
        self, members: Sequence[Member], namespaces: Mapping[str, Mapping[str, str]], prio: Priorities
    ) -> None:
        """At a translation's start: forget everything if the world it was computed in changed."""
        world = (list(members), {n: dict(labels) for n, labels in namespaces.items()}, prio)
        if world != self.world:
            self.world, self.assembly, self.deny = world, _Assembly(), {}

    def patch(
        self,
        world: _World,
        policies: Iterable[NetworkPolicy],
        prio: Priorities,
        logs: Mapping[str, LogSetting],
    ) -> _Assembly:
        """The assembly with `policies` as they are now."""
        asm, current = self.assembly, {p.key: p for p in policies}
        gone = [k for k in asm.had if k not in current]
        namespaces = {asm.had[k][0].namespace for k in gone}
        for key in gone:
            asm.forget(key)
        for key, p in current.items():
            log, had = logs.get(p.namespace, OFF), asm.had.get(key)
            if had is not None and (had[0] is p or had[0] == p) and had[1] == log:
                self.hits += 1
                continue
            if had is not None:
                asm.forget(key)
                namespaces.add(had[0].namespace)
            asm.add(world, p, prio, log)
            namespaces.add(p.namespace)
        for ns in namespaces:
            asm.isolate(ns)
        return asm


def translate(
    policies: Iterable[NetworkPolicy],
    members: Sequence[Member],
    namespaces: Mapping[str, Mapping[str, str]],
    node_ips: Iterable[str],
    *,
    invalid: Mapping[str, str] = {},
    previous: Mapping[str, Frozen] = {},
    prio: Priorities = DEFAULT_PRIORITIES,
    logging: Mapping[str, LogSetting] = {},
    memo: TranslateMemo | None = None,
) -> tuple[Desired, dict[str, str]]:
    """The desired OVN state, and {policy key: reason} for every policy skipped as invalid.

    `invalid` are the policies that did not parse; `previous` what OVN holds of each policy
    (from its port group). A skipped policy's objects are left as they are (the caller does
    not touch that owner) and the pods it isolated stay in their namespace's default deny:
    an invalid update never opens traffic. `logging` is each namespace's verdict logging. `memo`
    keeps the translation between calls (TranslateMemo); without one, a fresh memo assembles it.
    """
    world, out, skipped = _World(members, namespaces), Desired(), dict(invalid)
    memo = memo if memo is not None else TranslateMemo()
    memo.use(members, namespaces, prio)
    asm = memo.patch(world, policies, prio, logging)
    out.port_groups, out.address_sets = dict(asm.groups), dict(asm.sets)
    skipped |= asm.skipped
    isolated: dict[tuple[str, Direction], set[str]] = defaultdict(set)
    isolated.update((k, set(v)) for k, v in asm.isolated.items())
    for f in (previous[k] for k in skipped if k in previous):
        for d in ("Ingress", "Egress"):
            if d in f.types:
                isolated[(f.namespace, d)] |= f.lsps
    for (ns, d), lsps in isolated.items():
        pg = _deny(memo, ns, d, lsps, prio, logging.get(ns, OFF))
        out.port_groups[pg.name] = pg
    out.address_sets[NODES_SET] = AddressSet(NODES_SET, CLUSTER_OWNER, frozenset(node_ips))
    return out, skipped


def _deny(memo: TranslateMemo, ns: str, d: Direction, lsps: set[str], prio: Priorities,
          logs: LogSetting) -> PortGroup:  # fmt: skip
    """The namespace's default-deny group: the memo's while its pods and logging are the same."""
    had = memo.deny.get((ns, d))
    if had is not None and had[1] == logs and had[0] == lsps:
        return had[2]
    pg = _deny_group(ns, d, lsps, prio, logs)
    memo.deny[(ns, d)] = (frozenset(lsps), logs, pg)
    return pg


def _deny_group(ns: str, d: Direction, lsps: set[str], prio: Priorities, logs: LogSetting) -> PortGroup:
    name = deny_group(ns, d)
    drop_log = acl_log(logs, "deny", reference("np-deny", ns, d))
    if d == "Ingress":
        acls = {
            Acl("to-lport", prio.deny, f"outport == @{name} && ip", "drop", log=drop_log),
            Acl("to-lport", prio.allow, f"outport == @{name} && ip4.src == ${NODES_SET}", "allow-related"),
        }
    else:
        acls = {Acl("from-lport", prio.deny, f"inport == @{name} && ip", "drop", True, log=drop_log)}
    return PortGroup(name, f"namespace:{ns}", frozenset(lsps), frozenset(acls), d)


def _policy(
    world: _World, p: NetworkPolicy, prio: Priorities, logs: LogSetting
) -> tuple[PortGroup, list[AddressSet]]:
    name = policy_group(p.key)
    allow_log = acl_log(logs, "allow", reference("np", p.namespace, p.name))
    selected = world.selected(p)
    acls, sets = set(), []
    for d in sorted(p.types):
        for i, rule in enumerate(p.rules(d)):
            tag = f"{name}_{'in' if d == 'Ingress' else 'eg'}{i}"
            match, rule_sets = _rule(world, p, d, rule, tag, selected)
            sets += [AddressSet(s, p.key, frozenset(a)) for s, a in rule_sets.items()]
            if match is None:
                continue
            port_side = f"outport == @{name}" if d == "Ingress" else f"inport == @{name}"
            direction = "to-lport" if d == "Ingress" else "from-lport"
            match = f"{port_side} && {match}"
            acls.add(Acl(direction, prio.allow, match, "allow-related", d == "Egress", log=allow_log))
    lsps = frozenset(m.lsp for m in selected)
    return PortGroup(name, p.key, lsps, frozenset(acls), ",".join(sorted(p.types))), sets


def _rule(
    world: _World, p: NetworkPolicy, d: Direction, rule: Rule, tag: str, selected: list[Member]
) -> tuple[str | None, dict[str, set[str]]]:
    """(the match after the port side, or None for "matches nothing"; address sets it names)."""
    side = "src" if d == "Ingress" else "dst"
    sets: dict[str, set[str]] = {}
    terms: list[str] = []
    pod_peers = [m for peer in rule.peers for m in world.peers(p.namespace, peer)]
    if any(peer.ip_block is None for peer in rule.peers):
        sets[tag] = {ip for m in pod_peers for ip in world.v4[m.lsp]}
        terms.append(f"ip4.{side} == ${tag}")
    terms += [_block(peer, side) for peer in rule.peers if peer.ip_block is not None]
    # A named port is resolved on the destination: the selected pods (ingress) or the peers.
    targets = selected if d == "Ingress" else (pod_peers if rule.peers else world.everyone())
    scope = world.by_ns.get(p.namespace, []) if d == "Ingress" else world.everyone()
    port_terms = []
    for j, spec in enumerate(rule.ports):
        if not isinstance(spec.port, str):
            port_terms.append(_numeric(spec))
            continue
        if not any(cp.name == spec.port and cp.protocol == spec.protocol for m in scope for cp in m.ports):
            where = f"in namespace {p.namespace}" if d == "Ingress" else "in the cluster"
            raise UnknownNamedPort(f"no pod {where} declares {spec.protocol} port {spec.port!r}")
        for number, ips in sorted(_resolve(world, spec, targets).items()):
            name = f"{tag}_p{j}_{number}"
            sets[name] = ips
            port_terms.append(f"(ip4.dst == ${name} && {spec.protocol.lower()}.dst == {number})")
    if rule.ports and not port_terms:
        return None, sets
    match = " && ".join(
        t for t in ("ip4" if not terms else _any(terms), _any(port_terms) if port_terms else "") if t
    )
    return match, sets


def _resolve(world: _World, spec: PortSpec, targets: Sequence[Member]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = defaultdict(set)
    for m in targets:
        for cp in m.ports:
            if cp.name == spec.port and cp.protocol == spec.protocol and cp.container_port:
                out[cp.container_port].update(world.v4[m.lsp])
    return out


def _numeric(spec: PortSpec) -> str:
    proto = spec.protocol.lower()
    if spec.port is None:
        return proto
    if spec.end_port is not None and spec.end_port != spec.port:
        return f"({proto}.dst >= {spec.port} && {proto}.dst <= {spec.end_port})"
    return f"{proto}.dst == {spec.port}"


def _block(peer: Peer, side: str) -> str:
    assert peer.ip_block is not None
    b = peer.ip_block
    field_ = f"ip{b.cidr.version}.{side}"
    if not b.excepts:
        return f"{field_} == {b.cidr}"
    return f"({field_} == {b.cidr} && {field_} != {{{', '.join(str(e) for e in b.excepts)}}})"


def _any(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else "(" + " || ".join(terms) + ")"


def _v4(ips: Iterable[str]) -> list[str]:
    out = []
    for ip in ips:
        try:
            if ipaddress.ip_address(ip).version == 4:
                out.append(ip)
        except ValueError:
            continue
    return out
