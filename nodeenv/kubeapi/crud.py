"""The verbs' semantics, independent of HTTP: get, list, create, update, patch, delete, deletecollection.

Faithful: namespaced creates need an existing, non-terminating namespace (404 NotFound /
403 Forbidden as the NamespaceLifecycle admission plugin answers); 409 AlreadyExists; optimistic
concurrency on update and patch (a stale metadata.resourceVersion is 409 Conflict; none means
unconditional); the /status subresource; finalizers (delete sets deletionTimestamp and
deletionGracePeriodSeconds=0 and the object stays until an update empties the finalizers, which
removes it with one DELETED event); delete preconditions (uid, resourceVersion); dryRun=All; the
immortal namespaces default/kube-system/kube-public cannot be deleted. Validating admission in
kube-apiserver's order: PodSecurity (podsecurity/, on creates and updates), then ResourceQuota.
Simplified: deleting a namespace marks it Terminating, deletes its objects at once (objects with
finalizers stay until finalized) and removes the namespace when it is empty (no namespace controller
delay); propagationPolicy and gracePeriodSeconds are accepted but there is no garbage collector, so
ownerReferences are not followed and Pods are deleted at once (no kubelet to confirm).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from nodeenv.kubeapi import admission, apiservices, crds, serviceaccounts
from nodeenv.kubeapi.admissionpolicy import Policies
from nodeenv.kubeapi.defaults import apply_defaults
from nodeenv.kubeapi.errors import (
    STALE,
    ApiError,
    BadRequest,
    Forbidden,
    NotFound,
    already_exists,
    conflict,
    not_found,
)
from nodeenv.kubeapi.eventttl import EventLeases
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.objects import Obj, now_rfc3339, prepare_create, prepare_update
from nodeenv.kubeapi.paging import Page, Snapshots, paginate
from nodeenv.kubeapi.podsecurity.admission import PodSecurityAdmission
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.quota import Quotas
from nodeenv.kubeapi.selectors import Selector
from nodeenv.kubeapi.services import ServiceAllocator
from nodeenv.kubeapi.store import Store
from nodeenv.kubeapi.strategies import CRD

IMMORTAL = ("default", "kube-system", "kube-public")
START_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOptions:
    grace_period: int | None = None
    propagation: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


class Resources:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        service_cidr: str = "10.96.0.0/16",
        *,
        quotas: bool = False,
        pod_security: PodSecurityConfig | None = None,
        event_ttl: float = 3600.0,
    ) -> None:
        self.store, self.registry = store, registry
        self.event_leases = EventLeases(event_ttl)
        self.quotas = Quotas(store, registry) if quotas else None
        self.policies: Policies | None = Policies(store, registry)
        self.snapshots = Snapshots()
        self.namespaces = self._kind("", "v1", "namespaces")
        self.services = ServiceAllocator(self._kind("", "v1", "services"), service_cidr)
        pods = self._kind("", "v1", "pods")
        self.pod_security = PodSecurityAdmission(
            pod_security or PodSecurityConfig(),
            lambda ns: self.store.get(self.namespaces, "", ns),
            lambda ns: list(self.store.items(pods, ns)),
        )

    def _kind(self, group: str, version: str, plural: str) -> Kind:
        kind = self.registry.lookup(group, version, plural)
        assert kind is not None
        return kind

    def bootstrap(self) -> None:
        """What a fresh kube-apiserver has: the four namespaces (each with its default ServiceAccount),
        the `kubernetes` Service and the APIServices of its groups."""
        for ns in START_NAMESPACES:
            self.create(self.namespaces, "", {"metadata": {"name": ns}})
        ip = self.services.ips.nth(1)
        svc = {
            "metadata": {
                "name": "kubernetes",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {"clusterIP": ip, "ports": [{"name": "https", "port": 443, "targetPort": 6443}]},
        }
        self.create(self.services.kind, "default", svc)
        apiservices.register_builtin(self)

    def restore(self) -> None:
        """After the store was loaded from disk (durable.py), what a start derives from the objects
        instead of `bootstrap`: each CRD's kinds served, each Service's ClusterIP and nodePorts taken
        (never handed out twice), each Event's TTL counted from now."""
        for crd in self.store.items_of("apiextensions.k8s.io/customresourcedefinitions"):
            self.registry.register(crds.kinds_of(crd))
        for svc in self.store.items_of(self.services.kind.key):
            self.services.restore(svc)
        events = self._kind("", "v1", "events")
        for ev in list(self.store.items_of(events.key)):
            self.event_leases.on_stored(self, events, ev)

    # reads
    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        obj = self.store.get(kind, namespace, name)
        if obj is None:
            raise not_found(kind, name)
        return obj

    def list_page(
        self,
        kind: Kind,
        namespace: str | None,
        selector: Selector,
        limit: int = 0,
        token: str | None = None,
        at: int | None = None,
    ) -> Page:
        return paginate(self.store, self.snapshots, kind, namespace, selector, limit, token, at)

    # writes
    def create(self, kind: Kind, namespace: str, body: Any, *, dry_run: bool = False) -> Obj:
        obj = prepare_create(kind, body, namespace)
        if kind.namespaced:
            self._check_namespace_open(namespace)
        name = obj["metadata"]["name"]
        if self.store.get(kind, namespace, name) is not None:
            raise already_exists(kind, name)
        self._on_create(kind, obj)
        try:
            self._admit(kind, namespace, obj, None)
        finally:
            if dry_run:
                self._on_delete(kind, obj)
        if dry_run:
            return obj
        stored = self.store.put(kind, obj, None)
        self._refresh_quotas(namespace)
        self._on_stored(kind, stored)
        return stored

    def _on_stored(self, kind: Kind, obj: Obj) -> None:
        """A CRD written: its custom resources are served from the next request. A namespace: its
        default ServiceAccount."""
        serviceaccounts.on_stored(self, kind, obj)
        apiservices.on_stored(self, kind, obj)
        self.event_leases.on_stored(self, kind, obj)
        if (kind.group, kind.kind) == CRD:
            key = f"{obj['spec']['group']}/{obj['spec']['names']['plural']}"
            self.registry.unregister({key})
            self.registry.register(crds.kinds_of(obj))

    def _admit(self, kind: Kind, namespace: str, new: Obj, old: Obj | None) -> None:
        """The validating admission plugins in kube-apiserver's order: PodSecurity (creates here; updates
        in update()), ValidatingAdmissionPolicy (every write), ResourceQuota (creates and Service updates)."""
        try:
            if old is None:
                self._admit_pod_security(kind, namespace, new, None, "")
            if self.policies is not None:
                self.policies.admit("CREATE" if old is None else "UPDATE", kind, new, old)
            if self.quotas is not None and kind.namespaced and (old is None or kind is self.services.kind):
                self.quotas.admit(kind, namespace, new, old)
        except ApiError:
            if old is None:
                self._on_delete(kind, new)  # give back the ClusterIP/nodePorts just allocated
            raise

    def _admit_pod_security(
        self, kind: Kind, namespace: str, new: Obj, old: Obj | None, subresource: str
    ) -> None:
        """The PodSecurity plugin (podsecurity/admission.py): its warnings and audit annotations go to
        the request being served; a refusal is raised."""
        rec = admission.current()
        out = self.pod_security.validate(kind, namespace, new, old, rec.user, subresource or rec.subresource)
        rec.warnings.extend(out.warnings)
        rec.annotations.update({f"pod-security.kubernetes.io/{k}": v for k, v in out.annotations.items()})
        if out.error is not None:
            raise out.error

    def _refresh_quotas(self, namespace: str) -> None:
        if self.quotas is not None and namespace:
            self.quotas.refresh(namespace)

    def _check_namespace_open(self, namespace: str) -> None:
        ns = self.store.get(self.namespaces, "", namespace)
        if ns is None:
            raise not_found(self.namespaces, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise Forbidden(
                f"unable to create new content in namespace {namespace} because it is being terminated",
                {"name": namespace, "kind": "namespaces"},
            )

    def _on_create(self, kind: Kind, obj: Obj) -> None:
        if kind is self.services.kind:
            self.services.on_create(obj)
        elif (kind.group, kind.kind) == CRD:
            crds.with_status(obj, None, now_rfc3339())
        else:
            apply_defaults(kind.group, kind.kind, obj)

    def _on_delete(self, kind: Kind, obj: Obj) -> None:
        if kind is self.services.kind:
            self.services.on_delete(obj)

    def _crd_removed(self, crd: Obj) -> None:
        """Its custom resources go with it (the real finalizer deletes them first, then the CRD)."""
        key = f"{crd['spec']['group']}/{crd['spec']['names']['plural']}"
        for kind in self.registry.by_key(key)[:1]:
            for obj in list(self.store.items(kind)):
                self.store.remove(kind, obj)
            self.store.close_watches(kind)
        self.registry.unregister({key})

    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise BadRequest("Object 'metadata' is missing or not an object")
        if body["metadata"].get("name", name) != name:
            raise BadRequest(
                f"the name of the object ({body['metadata'].get('name')}) "
                f"does not match the name on the URL ({name})"
            )
        old = self.get(kind, namespace, name)
        rv = body["metadata"].get("resourceVersion")
        if rv not in (None, "") and rv != old["metadata"]["resourceVersion"]:
            raise conflict(kind, name, STALE)
        new = prepare_update(kind, old, body, subresource=subresource)
        self._admit_pod_security(kind, namespace, new, old, subresource)
        return self._store_update(kind, old, new, dry_run=dry_run)

    def _store_update(self, kind: Kind, old: Obj, new: Obj, *, dry_run: bool) -> Obj:
        namespace = str(old["metadata"].get("namespace") or "")
        self._admit(kind, namespace, new, old)  # a Service's nodePorts counted as the body names them
        if kind is self.services.kind and not dry_run:
            self.services.on_update(old, new)
        elif kind is self.namespaces:
            new.setdefault("status", old.get("status", {}))
            new.setdefault("spec", old.get("spec", {}))
        elif (kind.group, kind.kind) == CRD:
            crds.with_status(new, old, now_rfc3339())
        if dry_run:
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return new
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._remove(kind, new)
        stored = self.store.put(kind, new, old)
        self._refresh_quotas(namespace)
        self._on_stored(kind, stored)
        return stored

    def _remove(self, kind: Kind, obj: Obj) -> Obj:
        self._on_delete(kind, obj)
        gone = self.store.remove(kind, obj)
        if (kind.group, kind.kind) == CRD:
            self._crd_removed(obj)
        serviceaccounts.on_removed(self, kind, obj)
        apiservices.on_removed(self, kind, obj)
        self.event_leases.on_removed(kind, obj)
        ns = obj["metadata"].get("namespace")
        if ns:
            self._refresh_quotas(ns)
            self._finish_namespace_if_empty(ns)
        return gone

    # delete
    def delete(self, kind: Kind, namespace: str, name: str, opts: DeleteOptions) -> tuple[Obj, bool]:
        """Returns (object, removed now)."""
        obj = self.get(kind, namespace, name)
        meta = obj["metadata"]
        if opts.uid and opts.uid != meta.get("uid"):
            raise conflict(
                kind,
                name,
                f"Precondition failed: UID in precondition: {opts.uid}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if opts.resource_version and opts.resource_version != meta["resourceVersion"]:
            raise conflict(
                kind,
                name,
                f"Precondition failed: ResourceVersion in precondition: {opts.resource_version}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )
        if kind is self.namespaces and name in IMMORTAL:
            raise Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                            {"name": name, "kind": "namespaces"})  # fmt: skip
        if self.policies is not None:
            self.policies.admit("DELETE", kind, None, obj)
        if opts.dry_run:
            return obj, not meta.get("finalizers")
        if kind is self.namespaces:
            return self._delete_namespace(obj)
        if not meta.get("finalizers"):
            return self._remove(kind, obj), True
        if meta.get("deletionTimestamp"):
            return obj, False
        return self.store.put(kind, _marked(obj), obj), False

    def _delete_namespace(self, ns: Obj) -> tuple[Obj, bool]:
        name = ns["metadata"]["name"]
        if not ns["metadata"].get("deletionTimestamp"):
            marked = _marked(ns)
            marked["status"] = {**marked.get("status", {}), "phase": "Terminating"}
            ns = self.store.put(self.namespaces, marked, ns)
        for kind in self.registry.kinds:
            if kind.namespaced:
                for obj in list(self.store.items(kind, name)):
                    if not obj["metadata"].get("finalizers"):
                        self._on_delete(kind, obj)
                        self.store.remove(kind, obj)
                    elif not obj["metadata"].get("deletionTimestamp"):
                        self.store.put(kind, _marked(obj), obj)
        gone = self._finish_namespace_if_empty(name)
        return (gone, True) if gone is not None else (ns, False)

    def _finish_namespace_if_empty(self, name: str) -> Obj | None:
        ns = self.store.get(self.namespaces, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        if any(self.store.count(k, name) for k in self.registry.kinds if k.namespaced):
            return None
        return self.store.remove(self.namespaces, ns)

    def delete_collection(
        self, kind: Kind, namespace: str | None, selector: Selector, opts: DeleteOptions
    ) -> list[Obj]:
        out = []
        for obj in self.store.list(kind, namespace, selector):
            meta = obj["metadata"]
            if kind is self.namespaces and meta["name"] in IMMORTAL:
                continue
            try:
                out.append(self.delete(kind, meta.get("namespace", ""), meta["name"], opts)[0])
            except NotFound:
                continue
        return out


def _marked(obj: Obj) -> Obj:
    marked = copy.deepcopy(obj)
    marked["metadata"]["deletionTimestamp"] = now_rfc3339()
    marked["metadata"]["deletionGracePeriodSeconds"] = 0
    return marked
