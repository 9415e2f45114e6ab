"""Opt-in ResourceQuota admission for object counts (`ApiConfig(enforce_quota=True)`), and the quota
controller's status.

Like the ResourceQuota admission plugin, a create (and a Service update that changes what it counts)
in a namespace whose quotas would be exceeded is refused with 403 Forbidden
`exceeded quota: <quota>, requested: <r>=<n>, used: <r>=<n>, limited: <r>=<n>`. Counted: `pods`,
`services`, `services.loadbalancers`, `services.nodeports` (ports with a nodePort), `configmaps`,
`secrets`, `resourcequotas` and `count/<resource>[.<group>]` for every kind served. After each
write in such a namespace, status.hard and status.used of its quotas are brought up to date.
Simplified: compute and storage resources (requests.cpu, limits.memory, requests.storage, ...) are
neither counted nor required; they appear in status.hard only.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from nodeenv.kubeapi.errors import Forbidden
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.store import Obj, Store

_SHORT = {"pods", "services", "configmaps", "secrets", "resourcequotas"}


def usage(kind: Kind, obj: Obj) -> Counter[str]:
    """What one object counts against quotas."""
    out: Counter[str] = Counter()
    out[f"count/{kind.qualified}"] += 1
    if not kind.group and kind.plural in _SHORT:
        out[kind.plural] += 1
    if kind.kind == "Service" and not kind.group:
        spec = obj.get("spec") or {}
        if spec.get("type") == "LoadBalancer":
            out["services.loadbalancers"] += 1
        out["services.nodeports"] += sum(1 for p in spec.get("ports") or [] if p.get("nodePort"))
    return out


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None  # a compute quantity such as "2Gi": not counted here


def _exceeded(kind: Kind, obj: Obj, quota: Obj, resource: str, asked: int, used: int, hard: Any) -> Forbidden:
    name = obj["metadata"]["name"]
    return Forbidden(
        f'{kind.qualified} "{name}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, '
        f"requested: {resource}={asked}, used: {resource}={used}, limited: {resource}={hard}",
        {"name": name, "kind": kind.plural},
    )


class Quotas:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store, self.registry = store, registry
        kind = registry.lookup("", "v1", "resourcequotas")
        assert kind is not None
        self.kind = kind

    def _used(self, namespace: str) -> Counter[str]:
        used: Counter[str] = Counter()
        for k in self.registry.kinds:
            if k.namespaced and not k.virtual:
                for o in self.store.items(k, namespace):
                    used.update(usage(k, o))
        return used

    def admit(self, kind: Kind, namespace: str, new: Obj, old: Obj | None) -> None:
        """Raise Forbidden when `new` (replacing `old`) would exceed a quota of the namespace."""
        quotas = list(self.store.items(self.kind, namespace))
        if not quotas:
            return
        delta = usage(kind, new)
        delta.subtract(usage(kind, old) if old is not None else Counter())
        if all(v <= 0 for v in delta.values()):
            return
        used = self._used(namespace)
        for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            for resource, hard in sorted(((q.get("spec") or {}).get("hard") or {}).items()):
                limit = _int(hard)
                if limit is not None and delta[resource] > 0 and used[resource] + delta[resource] > limit:
                    raise _exceeded(kind, new, q, resource, delta[resource], used[resource], hard)

    def refresh(self, namespace: str) -> None:
        """The quota controller's part: status.hard and status.used of the namespace's quotas."""
        quotas = list(self.store.items(self.kind, namespace))
        if not quotas:
            return
        used = self._used(namespace)
        for q in quotas:
            hard = dict((q.get("spec") or {}).get("hard") or {})
            status = {
                "hard": hard,
                "used": {r: str(used[r]) if _int(h) is not None else "0" for r, h in hard.items()},
            }
            if q.get("status") != status:
                self.store.put(self.kind, {**q, "metadata": dict(q["metadata"]), "status": status}, q)
