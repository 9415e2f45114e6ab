"""List pagination with `limit` and `continue`, in the apiserver's token format.

The token is base64url(JSON {"v": "meta.k8s.io/v1", "rv": <list rv>, "start": "<key>\\u0000"}), as
k8s.io/apiserver/pkg/storage encodes it; every page reports the first page's resourceVersion, and a
token whose resourceVersion was compacted gets 410 Expired. `remainingItemCount` is set when no
selector is used, as etcd can count only then.
Later pages come from the first page's state, as etcd serves them at the token's revision: the last
32 paginated lists are kept (sharing the stored objects), older tokens are served from the history
(the current state with the newer events undone). `resourceVersionMatch=Exact` lists at that
version the same way; a version newer than the server's is 504 `Too large resource version` at
once (the real one first waits up to 3 s for its cache to catch up).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from dataclasses import dataclass

from nodeenv.kubeapi.errors import BadRequest, Expired, Timeout
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.selectors import Selector
from nodeenv.kubeapi.store import Obj, Store, namespace_of

TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results "
    "in an inconsistent list - objects that were created, modified, or deleted between the time "
    "the first chunk was returned and now may show up in the list."
)


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Obj]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


def _key(o: Obj) -> str:
    ns = namespace_of(o)
    return f"{ns}/{o['metadata']['name']}" if ns else o["metadata"]["name"]


def encode_token(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if raw.get("v") != "meta.k8s.io/v1":
            raise ValueError("wrong version")
        return int(raw["rv"]), str(raw["start"])
    except (ValueError, KeyError, TypeError, binascii.Error, AttributeError) as e:
        raise BadRequest(f"continue key is not valid: {e}") from e


class Snapshots:
    """The sorted result of recent paginated lists, so later pages come from the first page's state
    (etcd reads them at the token's revision). Objects are shared, never copied (they are immutable)."""

    def __init__(self, keep: int = 32) -> None:
        self._keep = keep
        self._lists: OrderedDict[tuple[str, str | None, Selector, int], list[Obj]] = OrderedDict()

    def put(self, key: tuple[str, str | None, Selector, int], items: list[Obj]) -> None:
        self._lists[key] = items
        self._lists.move_to_end(key)
        while len(self._lists) > self._keep:
            self._lists.popitem(last=False)

    def get(self, key: tuple[str, str | None, Selector, int]) -> list[Obj] | None:
        return self._lists.get(key)


def exact_rv(store: Store, rv: str | None, match: str | None) -> int | None:
    """The resourceVersion a list must be served at (Exact), None for the current state; the
    apiserver's errors for a bad combination or a version the server has not reached."""
    if match and not rv:
        raise BadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match not in (None, "", "Exact", "NotOlderThan"):
        raise BadRequest(f'resourceVersionMatch: Unsupported value: "{match}"')
    if not rv or rv == "0":
        if match == "Exact":
            raise BadRequest('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        return None
    try:
        wanted = int(rv)
    except ValueError as e:
        raise BadRequest(f"invalid resource version: {rv}") from e
    if wanted > store.rv:
        cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
        details = {"causes": [cause], "retryAfterSeconds": 1}
        raise Timeout(f"Too large resource version: {wanted}, current: {store.rv}", details)
    return wanted if match == "Exact" else None


def paginate(
    store: Store,
    snapshots: Snapshots,
    kind: Kind,
    namespace: str | None,
    sel: Selector,
    limit: int,
    token: str | None,
    at: int | None = None,
) -> Page:
    if token:
        rv, start = decode_token(token)
        if rv < store.floor:
            raise Expired(TOO_OLD)
        items = snapshots.get((kind.key, namespace, sel, rv)) or store.list_at(kind, namespace, sel, rv)
        items = [o for o in items if _key(o) >= start]
    elif at is not None:
        rv, items = at, store.list_at(kind, namespace, sel, at)
    else:
        rv, items = store.rv, store.list(kind, namespace, sel)
    if limit <= 0 or len(items) <= limit:
        return Page(items, str(rv))
    snapshots.put((kind.key, namespace, sel, rv), items)
    page, rest = items[:limit], len(items) - limit
    nxt = encode_token(rv, _key(page[-1]) + "\x00")
    return Page(page, str(rv), nxt, rest if sel.everything else None)
