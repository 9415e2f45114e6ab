"""Strategic-merge patch metadata: which lists merge by which key (the Go types' `patchStrategy` and
`patchMergeKey` struct tags), for the kinds the double serves. Lists not named here are atomic
(replaced wholesale), as for Go fields without a patch strategy.

A `Field` with `key=""` is a primitive list merged as a set (e.g. metadata.finalizers). Server-side
apply matches list items by `x-kubernetes-list-map-keys`, which for Service and container ports are
(port, protocol): `map_keys` (strategic merge keeps the single merge key, as the real one does).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Field:
    key: str | None = None  # merge key for a list; "" primitive set-merge; None: not a merge list
    children: dict[str, Field] = field(default_factory=dict)
    map_keys: tuple[str, ...] = ()  # server-side apply's listMapKeys when they are more than the merge key

    @property
    def ssa_keys(self) -> tuple[str, ...]:
        return self.map_keys or ((self.key,) if self.key else ())


KEY_DEFAULTS = {"protocol": "TCP"}
"""List-map keys that defaulting fills in, so an applied item without them matches the stored one."""


Schema = dict[str, Field]

CONDITIONS = Field("type")
META: Schema = {"finalizers": Field(""), "ownerReferences": Field("uid")}
CONTAINER: Schema = {
    "ports": Field("containerPort", map_keys=("containerPort", "protocol")),
    "env": Field("name"),
    "volumeMounts": Field("mountPath"),
    "volumeDevices": Field("devicePath"),
}
POD_SPEC: Schema = {
    "containers": Field("name", CONTAINER),
    "initContainers": Field("name", CONTAINER),
    "ephemeralContainers": Field("name", CONTAINER),
    "volumes": Field("name"),
    "imagePullSecrets": Field("name"),
    "hostAliases": Field("ip"),
}
TEMPLATE: Schema = {"metadata": Field(children=META), "spec": Field(children=POD_SPEC)}
POD_STATUS: Schema = {"conditions": CONDITIONS, "podIPs": Field("ip"), "hostIPs": Field("ip")}


def _kind(spec: Schema | None = None, status: Schema | None = None) -> Schema:
    return {
        "metadata": Field(children=META),
        "spec": Field(children=spec or {}),
        "status": Field(children=status or {}),
    }


BY_KIND: dict[str, Schema] = {
    "Pod": _kind(POD_SPEC, POD_STATUS),
    "Service": _kind({"ports": Field("port", map_keys=("port", "protocol"))}, {"conditions": CONDITIONS}),
    "Node": _kind({"podCIDRs": Field("")}, {"conditions": CONDITIONS, "addresses": Field("type")}),
    "Namespace": _kind(None, {"conditions": CONDITIONS}),
    "ResourceQuota": _kind(),
    **{
        k: _kind({"template": Field(children=TEMPLATE)}, {"conditions": CONDITIONS})
        for k in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job")
    },
    "CronJob": _kind(
        {"jobTemplate": Field(children={"spec": Field(children={"template": Field(children=TEMPLATE)})})}
    ),
}


def schema_for(kind: str) -> Schema:
    return BY_KIND.get(kind) or _kind()
