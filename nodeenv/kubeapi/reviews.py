"""Reviews answered at create time and never stored, as kube-apiserver does:

- authentication.k8s.io/v1 SelfSubjectReview (`kubectl auth whoami`): the caller's username and groups.
- authorization.k8s.io/v1 SelfSubjectAccessReview (`kubectl auth can-i`): whether the caller may do
  spec.resourceAttributes, decided by the RBAC authorizer from the Roles and bindings in the store
  when the double enforces RBAC; without enforcement every request is allowed, and the review says so.
- authentication.k8s.io/v1 TokenRequest, the serviceaccounts/token subresource (`token_request`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nodeenv.kubeapi.auth import Tokens, User
from nodeenv.kubeapi.errors import BadRequest
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.rbac import Authorizer
from nodeenv.kubeapi.routing import RequestInfo


def review(kind: Kind, body: Any, user: User, authorizer: Authorizer | None) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the review must be an object")
    out: dict[str, Any] = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"creationTimestamp": None},
    }
    if kind.kind == "SelfSubjectReview":
        out["status"] = {"userInfo": {"username": user.name, "groups": list(user.groups)}}
        return out
    spec = body.get("spec") or {}
    attrs = spec.get("resourceAttributes")
    out["spec"] = spec
    if not isinstance(attrs, dict):
        out["status"] = {"allowed": True, "reason": "non-resource URLs are open to authenticated users"}
        return out
    info = RequestInfo(
        verb=attrs.get("verb", ""), group=attrs.get("group", ""), version=attrs.get("version", ""),
        resource=attrs.get("resource", ""), subresource=attrs.get("subresource", ""),
        namespace=attrs.get("namespace", ""), name=attrs.get("name", ""),
    )  # fmt: skip
    if authorizer is None:
        out["status"] = {"allowed": True, "reason": "the API double does not enforce RBAC"}
    elif authorizer.allowed(user, info):
        out["status"] = {"allowed": True, "reason": "RBAC: allowed by a binding"}
    else:
        out["status"] = {"allowed": False}
    return out


def token_request(body: Any, namespace: str, name: str, tokens: Tokens) -> dict[str, Any]:
    """authentication.k8s.io/v1 TokenRequest (POST serviceaccounts/<name>/token, kubelet's call for
    projected tokens): a bearer token authenticating as `system:serviceaccount:<ns>:<name>`.
    Simplified: an opaque token of the double's token table (not a JWT), no audiences or expiry."""
    if not isinstance(body, dict) or body.get("kind", "TokenRequest") != "TokenRequest":
        raise BadRequest("the body must be a TokenRequest")
    raw = body.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    seconds = spec.get("expirationSeconds") or 3600
    if not isinstance(seconds, int) or seconds < 600:
        raise BadRequest(
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes"
        )
    expiry = datetime.now(UTC) + timedelta(seconds=seconds)
    return {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
        "spec": {**spec, "expirationSeconds": seconds},
        "status": {"token": tokens.token_for(f"system:serviceaccount:{namespace}:{name}"),
                   "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }  # fmt: skip
