"""The registry of kinds the double serves: adding a kind is one row in `KINDS`.

Each row carries what discovery publishes for it (kind, plural, singular, namespaced, verbs,
shortNames, categories, subresources) and the field selectors the real apiserver accepts for it
(metadata.name and metadata.namespace for every kind, plus the per-kind ones registered by each
kind's `GetAttrs`/field label conversion in kube-apiserver).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NS_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False  # has a /status subresource
    scale: bool = False  # has a /scale subresource (autoscaling/v1 Scale)
    fields: tuple[str, ...] = ()  # field selectors beyond metadata.name / metadata.namespace
    verbs: tuple[str, ...] = ALL_VERBS
    virtual: bool = False  # a review answered at create, never stored (SelfSubjectReview & co)
    generation: bool = False  # its strategy keeps metadata.generation (1 on create, +1 per spec change)
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    """A custom resource's openAPIV3Schema (from its CRD); None for built-in kinds."""
    columns: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, hash=False)
    """A custom resource's additionalPrinterColumns."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> str:
        """Storage key: one collection per group+resource, as in etcd."""
        return f"{self.group}/{self.plural}"

    @property
    def qualified(self) -> str:
        """How the apiserver names the resource in messages: `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def selectable_fields(self) -> tuple[str, ...]:
        base = ("metadata.name",) if not self.namespaced else ("metadata.name", "metadata.namespace")
        return base + self.fields


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
_RBAC = "rbac.authorization.k8s.io"
_STORAGE = "storage.k8s.io"


def _workload(
    group: str,
    kind: str,
    plural: str,
    short: tuple[str, ...] = (),
    fields: tuple[str, ...] = (),
    scale: bool = False,
) -> Kind:
    return Kind(group=group, version="v1", kind=kind, plural=plural, namespaced=True, short_names=short,
                categories=("all",), status=True, generation=True, fields=fields, scale=scale)  # fmt: skip


KINDS: tuple[Kind, ...] = (
    Kind(group="", version="v1", kind="Namespace", plural="namespaces", namespaced=False,
         short_names=("ns",), status=True, fields=("status.phase",), verbs=NS_VERBS),
    Kind(group="", version="v1", kind="Pod", plural="pods", namespaced=True, short_names=("po",),
         categories=("all",), status=True, fields=_POD_FIELDS),
    Kind(group="", version="v1", kind="Service", plural="services", namespaced=True,
         short_names=("svc",), categories=("all",), status=True, fields=("spec.clusterIP", "spec.type")),
    Kind(group="", version="v1", kind="Endpoints", plural="endpoints", namespaced=True, short_names=("ep",)),
    Kind(group="", version="v1", kind="Node", plural="nodes", namespaced=False, short_names=("no",),
         status=True, fields=("spec.unschedulable",)),
    Kind(group="", version="v1", kind="Event", plural="events", namespaced=True, short_names=("ev",),
         fields=_EVENT_FIELDS),
    Kind(group="", version="v1", kind="ConfigMap", plural="configmaps", namespaced=True, short_names=("cm",)),
    Kind(group="", version="v1", kind="Secret", plural="secrets", namespaced=True, fields=("type",)),
    Kind(group="", version="v1", kind="ServiceAccount", plural="serviceaccounts", namespaced=True,
         short_names=("sa",)),
    Kind(group="", version="v1", kind="ResourceQuota", plural="resourcequotas", namespaced=True,
         short_names=("quota",), status=True),
    Kind(group="", version="v1", kind="LimitRange", plural="limitranges", namespaced=True,
         short_names=("limits",)),
    Kind(group="", version="v1", kind="PersistentVolumeClaim", plural="persistentvolumeclaims",
         namespaced=True, short_names=("pvc",), status=True),
    Kind(group="", version="v1", kind="PersistentVolume", plural="persistentvolumes", namespaced=False,
         short_names=("pv",), status=True),
    Kind(group="", version="v1", kind="ReplicationController", plural="replicationcontrollers",
         namespaced=True, short_names=("rc",), categories=("all",), status=True, scale=True, generation=True),
    Kind(group="discovery.k8s.io", version="v1", kind="EndpointSlice", plural="endpointslices",
         namespaced=True, generation=True),
    Kind(group="networking.k8s.io", version="v1", kind="NetworkPolicy", plural="networkpolicies",
         namespaced=True, short_names=("netpol",), generation=True),
    Kind(group="events.k8s.io", version="v1", kind="Event", plural="events", namespaced=True,
         short_names=("ev",)),
    Kind(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases", namespaced=True),
    Kind(group="policy", version="v1", kind="PodDisruptionBudget", plural="poddisruptionbudgets",
         namespaced=True, short_names=("pdb",), status=True, generation=True),
    Kind(group=_RBAC, version="v1", kind="Role", plural="roles", namespaced=True),
    Kind(group=_RBAC, version="v1", kind="RoleBinding", plural="rolebindings", namespaced=True),
    Kind(group=_RBAC, version="v1", kind="ClusterRole", plural="clusterroles", namespaced=False),
    Kind(group=_RBAC, version="v1", kind="ClusterRoleBinding", plural="clusterrolebindings",
         namespaced=False),
    _workload("apps", "DaemonSet", "daemonsets", ("ds",)),
    _workload("apps", "Deployment", "deployments", ("deploy",), scale=True),
    _workload("apps", "StatefulSet", "statefulsets", ("sts",), scale=True),
    _workload("apps", "ReplicaSet", "replicasets", ("rs",), scale=True),
    Kind(group="apps", version="v1", kind="ControllerRevision", plural="controllerrevisions",
         namespaced=True),
    _workload("batch", "Job", "jobs", fields=("status.successful",)),
    _workload("batch", "CronJob", "cronjobs", ("cj",)),
    Kind(group=_STORAGE, version="v1", kind="StorageClass", plural="storageclasses", namespaced=False,
         short_names=("sc",)),
    Kind(group=_STORAGE, version="v1", kind="CSIDriver", plural="csidrivers", namespaced=False),
    Kind(group=_STORAGE, version="v1", kind="CSINode", plural="csinodes", namespaced=False),
    Kind(group=_STORAGE, version="v1", kind="VolumeAttachment", plural="volumeattachments",
         namespaced=False, status=True),
    Kind(group=_STORAGE, version="v1beta1", kind="VolumeAttributesClass", plural="volumeattributesclasses",
         namespaced=False, short_names=("vac",)),
    Kind(group="apiextensions.k8s.io", version="v1", kind="CustomResourceDefinition",
         plural="customresourcedefinitions", namespaced=False, short_names=("crd", "crds"),
         categories=("api-extensions",), status=True),
    Kind(group="admissionregistration.k8s.io", version="v1", kind="ValidatingAdmissionPolicy",
         plural="validatingadmissionpolicies", namespaced=False, categories=("api-extensions",), status=True,
         generation=True),
    Kind(group="admissionregistration.k8s.io", version="v1", kind="ValidatingAdmissionPolicyBinding",
         plural="validatingadmissionpolicybindings", namespaced=False, categories=("api-extensions",),
         generation=True),
    Kind(group="apiregistration.k8s.io", version="v1", kind="APIService", plural="apiservices",
         namespaced=False, categories=("api-extensions",), status=True),
    Kind(group="authentication.k8s.io", version="v1", kind="SelfSubjectReview", plural="selfsubjectreviews",
         namespaced=False, verbs=("create",), virtual=True),
    Kind(group="authorization.k8s.io", version="v1", kind="SelfSubjectAccessReview",
         plural="selfsubjectaccessreviews", namespaced=False, verbs=("create",), virtual=True),
)  # fmt: skip


class Registry:
    """Lookups by (group, version, plural) and by storage key. The built-in kinds are fixed; custom
    resources come and go with their CRDs (`register`/`unregister`, called from the event loop).
    `kinds` is replaced, never mutated, so other threads may iterate it."""

    def __init__(self, kinds: tuple[Kind, ...] = KINDS) -> None:
        self.kinds = kinds
        self._by_path = {(k.group, k.version, k.plural): k for k in kinds}

    def register(self, kinds: list[Kind]) -> None:
        """Adds or replaces the kinds of one group+resource (a CRD's served versions)."""
        keys = {k.key for k in kinds}
        self.unregister(keys)
        self.kinds = (*self.kinds, *kinds)
        self._by_path.update({(k.group, k.version, k.plural): k for k in kinds})

    def unregister(self, keys: set[str]) -> None:
        gone = [k for k in self.kinds if k.key in keys and k.schema is not None]
        self.kinds = tuple(k for k in self.kinds if k not in gone)
        for k in gone:
            self._by_path.pop((k.group, k.version, k.plural), None)

    def by_key(self, key: str) -> list[Kind]:
        return [k for k in self.kinds if k.key == key]

    def lookup(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_path.get((group, version, plural))

    def groups(self) -> dict[str, list[str]]:
        """Non-core group -> versions, in registry order."""
        out: dict[str, list[str]] = {}
        for k in self.kinds:
            if k.group and k.version not in out.setdefault(k.group, []):
                out[k.group].append(k.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self.kinds if k.group == group and k.version == version]
