"""The kinds the controllers watch and write: group/version/plural, and their REST paths."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Kind:
    """One API resource. `group` is "" for the core group (served under /api/v1)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """The `apiVersion` field of its objects: "v1" or "group/version"."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """The list/watch/create path; all namespaces when `namespace` is None."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            return f"{prefix}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def object_path(self, namespace: str | None, name: str, subresource: str | None = None) -> str:
        """The get/update/patch/delete path of one object (optionally its subresource)."""
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} is namespaced: a namespace is required")
        path = f"{self.collection_path(namespace if self.namespaced else None)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path


NAMESPACES = Kind("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Kind("", "v1", "nodes", "Node", namespaced=False)
PODS = Kind("", "v1", "pods", "Pod", namespaced=True)
SERVICES = Kind("", "v1", "services", "Service", namespaced=True)
ENDPOINTS = Kind("", "v1", "endpoints", "Endpoints", namespaced=True)
CONFIG_MAPS = Kind("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = Kind("", "v1", "secrets", "Secret", namespaced=True)
SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
RESOURCE_QUOTAS = Kind("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)
LIMIT_RANGES = Kind("", "v1", "limitranges", "LimitRange", namespaced=True)
CORE_EVENTS = Kind("", "v1", "events", "Event", namespaced=True)
ENDPOINT_SLICES = Kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True)
NETWORK_POLICIES = Kind("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", namespaced=True)
EVENTS = Kind("events.k8s.io", "v1", "events", "Event", namespaced=True)
LEASES = Kind("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
ROLES = Kind("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Kind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True)
CLUSTER_ROLES = Kind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Kind(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)

ALL_KINDS: tuple[Kind, ...] = (
    NAMESPACES, NODES, PODS, SERVICES, ENDPOINTS, CONFIG_MAPS, SECRETS, SERVICE_ACCOUNTS, RESOURCE_QUOTAS,
    LIMIT_RANGES, CORE_EVENTS, ENDPOINT_SLICES, NETWORK_POLICIES, EVENTS, LEASES, ROLES, ROLE_BINDINGS,
    CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS,
)  # fmt: skip


def object_key(obj: dict[str, object]) -> str:
    """The cache and work-queue key of an API object: "namespace/name", or "name" if cluster-scoped."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise ValueError("object has no metadata")
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("object has no metadata.name")
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


def split_key(key: str) -> tuple[str | None, str]:
    """Inverse of `object_key`: (namespace or None, name)."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)
