"""kube-controller-manager's serviceaccount controller, as far as clients see it: every namespace
has a `default` ServiceAccount, made when the namespace is made and made again when deleted (not
while the namespace terminates). Pods without serviceAccountName get `default` (defaults.py) and
their token through TokenRequest (serviceaccounts/default/token, reviews.py), as kubelet asks for
the projected kube-api-access volume.
Simplified: made in the same request as the namespace, not a moment later by a controller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodeenv.kubeapi.errors import ApiError
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.objects import Obj

if TYPE_CHECKING:
    from nodeenv.kubeapi.crud import Resources

DEFAULT = "default"


def account_kind(resources: Resources) -> Kind:
    kind = resources.registry.lookup("", "v1", "serviceaccounts")
    assert kind is not None
    return kind


def ensure_default(resources: Resources, namespace: str) -> None:
    """The `default` ServiceAccount of a live namespace, made if missing."""
    ns = resources.store.get(resources.namespaces, "", namespace)
    if ns is None or ns["metadata"].get("deletionTimestamp"):
        return
    kind = account_kind(resources)
    if resources.store.get(kind, namespace, DEFAULT) is None:
        try:
            resources.create(kind, namespace, {"metadata": {"name": DEFAULT}})
        except ApiError:  # e.g. an admission policy refusing it: the controller retries, we give up
            return


def on_stored(resources: Resources, kind: Kind, obj: Obj) -> None:
    if kind is resources.namespaces:
        ensure_default(resources, obj["metadata"]["name"])


def on_removed(resources: Resources, kind: Kind, obj: Obj) -> None:
    meta = obj["metadata"]
    if kind.group == "" and kind.plural == "serviceaccounts" and meta["name"] == DEFAULT:
        ensure_default(resources, meta.get("namespace", ""))
