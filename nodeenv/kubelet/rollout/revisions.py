"""Template hashes and ControllerRevisions, as the DaemonSet and StatefulSet controllers keep them:
one ControllerRevision `<owner>-<hash>` per template the owner has had, labelled like its template
(so `kubectl rollout history` finds them by the owner's selector) and carrying the template as the
strategic merge patch `kubectl rollout undo` applies (`{"spec": {"template": {..., "$patch":
"replace"}}}`), numbered 1, 2, ...; going back to an older template renumbers its revision to the
newest, as the controllers do. revisionHistoryLimit bounds the unused ones."""

from __future__ import annotations

import copy
import json
from typing import Any

from nodeenv.kubelet.controllers import short_hash
from nodeenv.kubelet.rollout.plan import REVISIONS, Obj, Plan, owner_ref

HASH_LABEL = "controller-revision-hash"


def semantic(value: Any) -> Any:
    """A template as Go's structs hold it: null and empty objects are the zero value, as absent
    (kubectl's `rollout undo` sends `creationTimestamp: null` and `resources: {}`)."""
    if isinstance(value, dict):
        kept = {k: semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def template_hash(template: Obj) -> str:
    return short_hash(json.dumps(semantic(template), sort_keys=True))


def number(rev: Obj) -> int:
    return int(rev.get("revision", 0))


def revision_object(owner: Obj, kind: str, name: str, h: str, revision: int) -> Obj:
    template = copy.deepcopy(owner["spec"]["template"])
    labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: h}
    meta = {"name": name, "namespace": owner["metadata"]["namespace"], "labels": labels,
            "annotations": dict(owner["metadata"].get("annotations") or {}),
            "ownerReferences": [owner_ref(owner, kind)]}  # fmt: skip
    meta["annotations"].pop("kubectl.kubernetes.io/last-applied-configuration", None)
    data = {"spec": {"template": {**template, "$patch": "replace"}}}
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "data": data,
            "revision": revision}  # fmt: skip


def ensure_revision(owner: Obj, kind: str, revs: list[Obj], name: str, h: str, plan: Plan) -> int:
    """The revision of the owner's current template (created, or renumbered to the newest)."""
    newest = max((number(r) for r in revs), default=0)
    mine = next((r for r in revs if r["metadata"]["name"] == name), None)
    if mine is None:
        plan.creates.append((REVISIONS, owner["metadata"]["namespace"],
                             revision_object(owner, kind, name, h, newest + 1)))  # fmt: skip
        return newest + 1
    if number(mine) < newest:
        plan.patches.append((REVISIONS, owner["metadata"]["namespace"], name, {"revision": newest + 1}))
        return newest + 1
    return number(mine)


def prune(owner: Obj, revs: list[Obj], in_use: set[str], plan: Plan) -> None:
    """Revisions beyond revisionHistoryLimit that no Pod runs, oldest first."""
    limit = int(owner["spec"].get("revisionHistoryLimit", 10))
    unused = sorted((r for r in revs if r["metadata"]["name"] not in in_use), key=number)
    for rev in unused[: max(0, len(unused) - limit)]:
        plan.delete(REVISIONS, rev)
