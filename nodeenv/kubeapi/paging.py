"""List pagination with `limit` and `continue`, in the apiserver's token format.

The token is base64url(JSON {"v": "meta.k8s.io/v1", "rv": <list rv>, "start": "<key>\\u0000"}), as
k8s.io/apiserver/pkg/storage encodes it; every page reports the first page's resourceVersion, and a
token whose resourceVersion was compacted gets 410 Expired. `remainingItemCount` is set when no
selector is used, as etcd can count only then.
Simplified: later pages are read from the current state after the token's key, not from a
snapshot at the token's resourceVersion (objects changed meanwhile show their new state).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from nodeenv.kubeapi.errors import BadRequest, Expired
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


def paginate(
    store: Store, kind: Kind, namespace: str | None, sel: Selector, limit: int, token: str | None
) -> Page:
    rv = store.rv
    items = store.list(kind, namespace, sel)
    if token:
        rv, start = decode_token(token)
        if rv < store.floor:
            raise Expired(TOO_OLD)
        items = [o for o in items if _key(o) >= start]
    if limit <= 0 or len(items) <= limit:
        return Page(items, str(rv))
    page, rest = items[:limit], len(items) - limit
    nxt = encode_token(rv, _key(page[-1]) + "\x00")
    return Page(page, str(rv), nxt, rest if sel.everything else None)
