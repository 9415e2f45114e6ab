"""AdminNetworkPolicies and the BaselineAdminNetworkPolicy → OVN port groups, address sets and ACLs,
added to the NetworkPolicies' desired state (pure).

Precedence is expressed by ACL priority bands in each direction's ACL stage (ingress `to-lport`;
egress `from-lport` applied after the load balancer, as NetworkPolicy's egress). They were designed
for OVN 23.03, whose northbound schema (7.0.0) has no ACL `tier` column and no `pass` action (both
arrive in 23.06); the OVN 25.03 the suite runs has both (`ACL.tier`, 0-3), but the bands still do the
work (tiers could be used later):

    ANP band      30000 downwards   ANP priority p: 289 priorities from 30000 - 289p; its rules in order
    NetworkPolicy 1001 / 1000       allow-related / default-deny drop (translate.py, --allow/--deny-priority)
    BANP band     999 downwards     the BANP's rules in order
    below         nothing           default allow

so the highest-priority ACL that matches decides, which is the API's order: ANPs by priority, then
NetworkPolicy, then BANP, then allow. Allow is `allow-related` (the reply of an allowed connection
passes), Deny is `drop`.

Pass ("skip the remaining ANPs; NetworkPolicy, then BANP decide") has no OVN action here. A Pass rule
with match T takes a slot of 3 + (BANP rules in that direction) priorities in the ANP band, holding
a copy of the layers below restricted to T: every NetworkPolicy ACL of the subject's namespaces
(`(T) && (np match)`, allow level then deny level), every BANP rule (`(T) && (banp match)`), then
`T` allow-related (the default). Traffic matching T is decided inside the slot, so ANP rules with
lower precedence never see it, and the result is what NetworkPolicy and BANP would decide. Cost:
the slot's ACLs grow with the NetworkPolicy ACLs of the subject's namespaces.

Limits of the bands: ANP priorities 0-99 (higher is refused with a status condition, as
ovn-kubernetes does); one ANP's rules and Pass slots must fit its priority's 289 (else it is not
applied, status says so); ANPs sharing a priority share its band, rule i of each at the same ACL
priority (the API leaves their order undefined; the status says which ANPs share it). Fixed bands
keep every other ANP's ACLs untouched when one ANP comes, changes or goes.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controllers.netpol.acl_logging import AclLog, acl_log, reference
from controllers.netpol.adminpolicy import AdminPeer, AdminPolicy, AdminPort, AdminRule
from controllers.netpol.policy import Direction, Selector
from controllers.netpol.translate import (
    DEFAULT_PRIORITIES,
    Acl,
    AddressSet,
    Desired,
    Member,
    PortGroup,
    Priorities,
    _World,
    ident,
)

ANP_TOP = 30000
MAX_PRIORITY = 99
STRIDE = 289
PEERS_OWNER = "anp-peers"
"""ACL priorities of one ANP priority's band: (30000 - 1002) // 100, so band p is 30000 - 289p downwards
and adding, changing or removing an ANP never moves another priority's ACLs."""
DIRECTIONS: tuple[Direction, ...] = ("Ingress", "Egress")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    addresses: tuple[str, ...]
    """status.addresses (InternalIP, ExternalIP)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the policy's `Ready` condition says."""

    ready: bool
    reason: str
    message: str


@dataclass
class _Compiled:
    """One rule's match (None: matches nothing) and the address sets it names."""

    match: str | None
    sets: list[AddressSet] = field(default_factory=list)


def admin_group(key: str) -> str:
    return ident("pn_anp", key)


def _acl_direction(d: Direction) -> str:
    return "to-lport" if d == "Ingress" else "from-lport"


class _Admin:
    def __init__(self, world: _World, nodes: Sequence[NodeInfo]) -> None:
        self.world, self.nodes = world, nodes

    def subject(self, p: AdminPolicy) -> list[Member]:
        s = p.subject
        pods = s.pod_selector
        return [
            m
            for n in self.namespaces(s.namespace_selector)
            for m in self.world.by_ns.get(n, ())
            if pods is None or pods.matches(m.labels)
        ]

    def namespaces(self, sel: Selector | None) -> list[str]:
        return [n for n, lab in self.world.ns_labels.items() if sel is None or sel.matches(lab)]

    def peer_pods(self, peer: AdminPeer) -> list[Member]:
        if peer.kind not in ("namespaces", "pods"):
            return []
        sel = peer.pod_selector
        return [
            m
            for n in self.namespaces(peer.namespace_selector)
            for m in self.world.by_ns.get(n, ())
            if sel is None or sel.matches(m.labels)
        ]

    def peer_addresses(self, peer: AdminPeer) -> tuple[set[str], set[str]]:
        """(IPv4 addresses and CIDRs, IPv6 ones) of one peer."""
        v4: set[str] = set()
        v6: set[str] = set()
        for m in self.peer_pods(peer):
            v4.update(self.world.v4[m.lsp])
        if peer.kind == "nodes":
            assert peer.node_selector is not None
            for node in self.nodes:
                if peer.node_selector.matches(node.labels):
                    for a in node.addresses:
                        (v4 if ipaddress.ip_address(a).version == 4 else v6).add(a)
        for net in peer.networks:
            (v4 if net.version == 4 else v6).add(str(net))
        return v4, v6

    def compile(
        self, tag: str, port_side: str, d: Direction, rule: AdminRule, selected: list[Member]
    ) -> _Compiled:
        side = "src" if d == "Ingress" else "dst"
        out = _Compiled(None)
        terms: list[str] = []
        if not any(p.kind == "all" for p in rule.peers):
            v4: set[str] = set()
            v6: set[str] = set()
            for peer in rule.peers:
                a4, a6 = self.peer_addresses(peer)
                v4 |= a4
                v6 |= a6
            shared = peers_set(rule.peers)  # one set per distinct peer list, whatever ANP names it
            out.sets.append(AddressSet(f"{shared}_v4", PEERS_OWNER, frozenset(v4)))
            terms.append(f"ip4.{side} == ${shared}_v4")
            if v6:
                out.sets.append(AddressSet(f"{shared}_v6", PEERS_OWNER, frozenset(v6)))
                terms.append(f"ip6.{side} == ${shared}_v6")
        peers = _any(terms) if terms else "ip"
        targets = selected if d == "Ingress" else [m for p in rule.peers for m in self.peer_pods(p)]
        port_terms: list[str] = []
        for j, spec in enumerate(rule.ports):
            if not spec.name:
                port_terms.append(_numeric(spec))
                continue
            for (proto, number), ips in sorted(_resolve(self.world, spec.name, targets).items()):
                name = f"{tag}_p{j}_{proto.lower()}{number}"
                out.sets.append(AddressSet(name, "", frozenset(ips)))
                port_terms.append(f"(ip4.dst == ${name} && {proto.lower()}.dst == {number})")
        if rule.ports and not port_terms:
            return out  # only named ports no destination declares: matches nothing
        parts = [port_side, peers] + ([_any(port_terms)] if port_terms else [])
        out.match = " && ".join(parts)
        return out


def peers_set(peers: tuple[AdminPeer, ...]) -> str:
    """The address set of a rule's peers, named by the peers themselves: the "every project" peer of a
    hundred project ANPs is one set, and its members change in place."""
    return ident("pn_anp_peers", repr(peers))


def _resolve(world: _World, name: str, targets: Sequence[Member]) -> dict[tuple[str, int], set[str]]:
    out: dict[tuple[str, int], set[str]] = defaultdict(set)
    for m in targets:
        for cp in m.ports:
            if cp.name == name and cp.container_port:
                out[(cp.protocol, cp.container_port)].update(world.v4[m.lsp])
    return out


def _numeric(spec: AdminPort) -> str:
    proto = spec.protocol.lower()
    if spec.start == spec.end:
        return f"{proto}.dst == {spec.start}"
    return f"({proto}.dst >= {spec.start} && {proto}.dst <= {spec.end})"


def _any(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else "(" + " || ".join(terms) + ")"


_ACTIONS = {"Allow": "allow-related", "Deny": "drop"}


def _np_layers(out: Desired, prio: Priorities) -> dict[tuple[str, str], list[tuple[int, Acl]]]:
    """The NetworkPolicy ACLs by (namespace, ACL direction), each with its level (0 allow, 1 deny)."""
    layers: dict[tuple[str, str], list[tuple[int, Acl]]] = defaultdict(list)
    for pg in out.port_groups.values():
        if pg.owner.startswith("namespace:"):
            ns = pg.owner.removeprefix("namespace:")
        elif "/" in pg.owner:
            ns = pg.owner.split("/")[0]
        else:
            continue
        for a in pg.acls:
            layers[(ns, a.direction)].append((0 if a.priority >= prio.allow else 1, a))
    return layers


class AdminCache:
    """The ANPs as translated by earlier reconciles, reused while the policy, the pods, namespaces and
    nodes it selects from, and (for a Pass rule) the NetworkPolicy and BANP layers it copies are the
    same: one ANP changed among a hundred is one translated."""

    def __init__(self) -> None:
        self.world: tuple[object, ...] = ()
        self.subjects: dict[object, tuple[str, ...]] = {}
        self.entries: dict[tuple[object, ...], tuple[PortGroup, list[AddressSet], dict[Direction, int]]] = {}


def _world_key(
    members: Sequence[Member], namespaces: Mapping[str, Mapping[str, str]], nodes: Sequence[NodeInfo]
) -> tuple[object, ...]:
    return (
        tuple((m.namespace, m.name, m.lsp, m.ips, tuple(sorted(m.labels.items())), m.ports) for m in members),
        tuple(sorted((n, tuple(sorted(lab.items()))) for n, lab in namespaces.items())),
        tuple((n.name, tuple(sorted(n.labels.items())), n.addresses) for n in nodes),
    )


def translate_admin(
    out: Desired,
    policies: Sequence[AdminPolicy],
    members: Sequence[Member],
    namespaces: Mapping[str, Mapping[str, str]],
    nodes: Sequence[NodeInfo],
    *,
    prio: Priorities = DEFAULT_PRIORITIES,
    cache: AdminCache | None = None,
) -> dict[str, Outcome]:
    """Add the ANPs' and the BANP's rows to `out` (the NetworkPolicies' desired state, complete);
    {policy key: outcome} for every policy given."""
    admin = _Admin(_World(members, namespaces), nodes)
    cache = cache or AdminCache()
    world = _world_key(members, namespaces, nodes)
    if cache.world != world:
        cache.world, cache.entries, cache.subjects = world, {}, {}
    outcomes: dict[str, Outcome] = {}
    banp = next((p for p in policies if p.baseline), None)
    banp_rules: dict[Direction, list[Acl]] = {"Ingress": [], "Egress": []}
    if banp is not None:
        banp_rules = _baseline(out, admin, banp, prio)
        outcomes[banp.key] = _ready(banp, sum(len(v) for v in banp_rules.values()))
    banp_key = (tuple(banp_rules["Ingress"]), tuple(banp_rules["Egress"]))
    anps = sorted((p for p in policies if not p.baseline), key=lambda p: (p.priority or 0, p.name))
    np_layers = _np_layers(out, prio) if anps else {}  # every NetworkPolicy ACL: only for an ANP
    by_priority: dict[int, list[str]] = defaultdict(list)
    for p in anps:
        by_priority[p.priority or 0].append(p.name)
    used_entries: dict[tuple[object, ...], tuple[PortGroup, list[AddressSet], dict[Direction, int]]] = {}
    for p in anps:
        assert p.priority is not None
        if p.priority > MAX_PRIORITY:
            outcomes[p.key] = Outcome(
                False,
                "SetupFailed",
                f"priority {p.priority} is above {MAX_PRIORITY}, "
                f"the highest this implementation supports: not applied",
            )
            continue
        passes = any(r.action == "Pass" for d in DIRECTIONS for r in p.rules(d))
        key = (p, _layers_key(admin, cache, p, np_layers, banp_key) if passes else None)
        hit = cache.entries.get(key) or _anp(admin, p, ANP_TOP - p.priority * STRIDE, banp_rules, np_layers)
        used_entries[key] = hit
        pg, sets, used = hit
        if any(used[d] > STRIDE for d in DIRECTIONS):
            outcomes[p.key] = Outcome(
                False,
                "SetupFailed",
                f"its rules and Pass slots need {max(used.values())} "
                f"ACL priorities, more than one ANP priority's band ({STRIDE}): not applied",
            )
            continue
        out.port_groups[pg.name] = pg
        out.address_sets.update((s.name, s) for s in sets)
        outcome = _ready(p, len(pg.acls))
        shared = [n for n in by_priority[p.priority] if n != p.name]
        if shared and outcome.ready:
            outcome = Outcome(
                True,
                outcome.reason,
                f"{outcome.message}; shares priority {p.priority} with "
                f"{', '.join(shared)} (rules of equal index get equal ACL priorities: the API "
                "leaves their order undefined)",
            )
        outcomes[p.key] = outcome
    cache.entries = used_entries
    return outcomes


def _layers_key(
    admin: _Admin,
    cache: AdminCache,
    p: AdminPolicy,
    np_layers: Mapping[tuple[str, str], list[tuple[int, Acl]]],
    banp_key: object,
) -> object:
    """What a Pass slot of `p` copies: the BANP and the NetworkPolicy ACLs of its subject's namespaces."""
    spaces = cache.subjects.get(p.subject)
    if spaces is None:
        spaces = cache.subjects[p.subject] = tuple(admin.namespaces(p.subject.namespace_selector))
    return banp_key, tuple(
        (ns, d, tuple(sorted(np_layers.get((ns, d), ()), key=str)))
        for ns in spaces
        for d in ("to-lport", "from-lport")
    )


def _ready(p: AdminPolicy, acls: int) -> Outcome:
    if p.unsupported:
        return Outcome(
            False,
            "SetupFailed",
            f"applied as {acls} OVN ACLs, but not supported (fail closed): {', '.join(p.unsupported)}",
        )
    return Outcome(True, "SetupSucceeded", f"applied as {acls} OVN ACLs")


def _baseline(out: Desired, admin: _Admin, p: AdminPolicy, prio: Priorities) -> dict[Direction, list[Acl]]:
    name = admin_group(p.key)
    selected = admin.subject(p)
    acls: dict[Direction, list[Acl]] = {"Ingress": [], "Egress": []}
    for d in DIRECTIONS:
        side = f"outport == @{name}" if d == "Ingress" else f"inport == @{name}"
        for i, rule in enumerate(p.rules(d)):
            tag = f"{name}_{'in' if d == 'Ingress' else 'eg'}{i}"
            c = admin.compile(tag, side, d, rule, selected)
            out.address_sets.update((s.name, _owned(s, p)) for s in c.sets)
            if c.match is not None:
                acls[d].append(Acl(_acl_direction(d), prio.deny - 1 - i, c.match, _ACTIONS[rule.action],
                                   d == "Egress", _ref(p, d, i, rule), _log(p, rule.action)))  # fmt: skip
    pg = PortGroup(
        name, p.key, frozenset(m.lsp for m in selected), frozenset(acls["Ingress"] + acls["Egress"])
    )
    out.port_groups[name] = pg
    return acls


def _log(p: AdminPolicy, action: str) -> AclLog | None:
    """The ACL's verdict logging (acl_logging), by the rule's action (a Pass slot's ACLs: `pass`),
    named `anp//<name>` or `banp//default`."""
    return acl_log(p.logging, action.lower(), reference("banp" if p.baseline else "anp", "", p.name))


def _owned(s: AddressSet, p: AdminPolicy) -> AddressSet:
    return s if s.owner else AddressSet(s.name, p.key, s.addresses)


def _ref(p: AdminPolicy, d: Direction, i: int, rule: AdminRule) -> str:
    return f"{p.key}/{d.lower()}/{i}/{rule.action}/{rule.name}"


def _anp(
    admin: _Admin,
    p: AdminPolicy,
    band_top: int,
    banp_rules: Mapping[Direction, list[Acl]],
    np_layers: Mapping[tuple[str, str], list[tuple[int, Acl]]],
) -> tuple[PortGroup, list[AddressSet], dict[Direction, int]]:
    """The ANP's port group (subject pods, every ACL), its address sets, and the priorities it used."""
    name = admin_group(p.key)
    selected = admin.subject(p)
    subject_ns = sorted({m.namespace for m in selected})
    acls: list[Acl] = []
    sets: list[AddressSet] = []
    used: dict[Direction, int] = {d: 0 for d in DIRECTIONS}
    for d in DIRECTIONS:
        side = f"outport == @{name}" if d == "Ingress" else f"inport == @{name}"
        direction, after = _acl_direction(d), d == "Egress"
        for i, rule in enumerate(p.rules(d)):
            tag = f"{name}_{'in' if d == 'Ingress' else 'eg'}{i}"
            c = admin.compile(tag, side, d, rule, selected)
            sets += [_owned(s, p) for s in c.sets]
            top, ref, log = band_top - used[d], _ref(p, d, i, rule), _log(p, rule.action)
            if rule.action != "Pass":
                used[d] += 1
                if c.match is not None:
                    acls.append(Acl(direction, top, c.match, _ACTIONS[rule.action], after, ref, log))
                continue
            levels = 3 + len(banp_rules[d])
            used[d] += levels
            if c.match is None:
                continue
            t = c.match
            for ns in subject_ns:
                for level, a in np_layers.get((ns, direction), ()):
                    acls.append(
                        Acl(direction, top - level, f"({t}) && ({a.match})", a.action, after, ref, log)
                    )
            for k, b in enumerate(banp_rules[d]):
                acls.append(Acl(direction, top - 2 - k, f"({t}) && ({b.match})", b.action, after, ref, log))
            acls.append(Acl(direction, top - levels + 1, t, "allow-related", after, ref, log))
    pg = PortGroup(name, p.key, frozenset(m.lsp for m in selected), frozenset(acls))
    return pg, sets, used
