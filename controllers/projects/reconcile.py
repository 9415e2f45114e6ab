"""Project namespaces: ensure the template's objects, repair drift, remove them when the label goes.

Ownership: an object is ours when it carries `app.kubernetes.io/managed-by=plasmacloud-project-
controller` and an ownerReference to its namespace's uid. The owned-object informers watch only
that label, so an object someone else created with the same name never enters our caches: our
create gets 409, a GET shows it is not ours, and it is left alone (one Warning Event on the
namespace). Deletions carry a uid precondition, so we never delete what replaced ours.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controllers.machinery import NAMESPACES, ApiException, EventRecorder, Kind, KubeClient, Store
from controllers.projects.podsecurity import ensure_pod_security
from controllers.projects.template import (
    KINDS,
    MANAGED_BY,
    MANAGER,
    Owned,
    ProjectTemplate,
    desired_objects,
    drifted,
)

log = logging.getLogger(__name__)


def is_ours(obj: Mapping[str, Any], ns: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata", {})
    uid = ns["metadata"].get("uid")
    return (meta.get("labels") or {}).get(MANAGED_BY) == MANAGER and any(
        r.get("kind") == "Namespace" and r.get("uid") == uid for r in meta.get("ownerReferences") or ()
    )


class ProjectReconciler:
    def __init__(
        self,
        client: KubeClient,
        namespaces: Store,
        owned: Mapping[Kind, Store],
        template: ProjectTemplate,
        events: EventRecorder | None = None,
    ) -> None:
        self.client, self.namespaces, self.owned = client, namespaces, owned
        self.template, self.events = template, events
        self.foreign: set[tuple[str, str, str]] = set()
        """(namespace, kind, name) reported as not ours (one Event each)."""

    async def reconcile(self, key: str) -> None:
        ns = self.namespaces.get_by_key(key)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return  # the namespace's deletion removes everything in it
        try:
            await self._reconcile(key, ns)
        except ApiException as e:
            if e.status not in (403, 404) or not await self._namespace_gone(key):
                raise
            log.info("namespace %s went away during its reconcile (HTTP %d): nothing left to do", key,
                     e.status, extra={"key": key})  # fmt: skip

    async def _namespace_gone(self, name: str) -> bool:
        """Deleted or terminating now, as the API says (the cache may not have seen it yet): a create
        in it is refused with 404 NotFound or 403 Forbidden, and there is nothing to retry."""
        try:
            ns = await self.client.get(NAMESPACES, None, name)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return bool(ns["metadata"].get("deletionTimestamp"))

    async def _reconcile(self, key: str, ns: Mapping[str, Any]) -> None:
        want = desired_objects(ns, self.template)
        if want and await ensure_pod_security(self.client, ns):
            log.info("set the Pod Security labels of namespace %s", key)
        for o in want:
            await self._ensure(ns, o)
        names = {(o.kind.plural, o.name) for o in want}
        for kind in KINDS:
            for obj in self.owned[kind].list(key):
                if (kind.plural, obj["metadata"]["name"]) not in names and is_ours(obj, ns):
                    await self._delete(kind, obj)

    async def _ensure(self, ns: Mapping[str, Any], o: Owned) -> None:
        have = self.owned[o.kind].get(o.body["metadata"]["namespace"], o.name)
        if have is None:
            try:
                await self.client.create(o.kind, o.body)
                log.info("created %s %s/%s", o.kind.kind, o.body["metadata"]["namespace"], o.name)
                return
            except ApiException as e:
                if e.status != 409:
                    raise
            have = await self.client.get(o.kind, o.body["metadata"]["namespace"], o.name)  # cache behind?
            if not is_ours(have, ns):
                await self._foreign(ns, o)
                return
        if not is_ours(have, ns):
            return
        if drifted(o.body, have):
            await self._repair(o, have)

    async def _repair(self, o: Owned, have: Mapping[str, Any]) -> None:
        ns_name = o.body["metadata"]["namespace"]
        if o.kind.kind == "RoleBinding" and have.get("roleRef") != o.body["roleRef"]:  # roleRef is immutable
            await self._delete(o.kind, have)
            await self.client.create(o.kind, o.body)
        else:
            meta = {**o.body["metadata"], "resourceVersion": have["metadata"].get("resourceVersion")}
            await self.client.replace(o.kind, {**o.body, "metadata": meta})
        log.info("repaired drift of %s %s/%s", o.kind.kind, ns_name, o.name)

    async def _delete(self, kind: Kind, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        try:
            await self.client.delete(
                kind, meta["namespace"], meta["name"], preconditions={"uid": meta["uid"]}
            )
            log.info("deleted %s %s/%s", kind.kind, meta["namespace"], meta["name"])
        except ApiException as e:
            if e.status not in (404, 409):
                raise

    async def _foreign(self, ns: Mapping[str, Any], o: Owned) -> None:
        key = (ns["metadata"]["name"], o.kind.kind, o.name)
        if key in self.foreign:
            return
        self.foreign.add(key)
        log.warning("%s %s/%s exists and is not ours: left alone", o.kind.kind, key[0], o.name)
        if self.events is not None:
            await self.events.record(dict(ns), "Warning", "NotOwned", "Ensure",
                                     f"{o.kind.kind} {o.name} exists and is not managed by {MANAGER}; "
                                     "left as it is")  # fmt: skip
