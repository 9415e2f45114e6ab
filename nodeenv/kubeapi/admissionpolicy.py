"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), evaluated as kube-apiserver's
ValidatingAdmissionPolicy plugin does (on by default since 1.30), with CEL from cel-python.

For each create, update (incl. subresources) and delete made by a client, every
ValidatingAdmissionPolicyBinding whose policy matches the request is evaluated:
- the policy's `matchConstraints.resourceRules` (apiGroups, apiVersions, resources incl.
  `<plural>/<sub>`, operations; `*` matches all) and `namespaceSelector` (for a namespaced object its
  Namespace's labels, for a Namespace its own), then the binding's `matchResources.namespaceSelector`;
- `matchConditions` (CEL, all must be true, else the policy does not apply);
- `validations`: each expression must be true, else the request is refused with the validation's
  `reason` (default Invalid, 422; Forbidden 403) and kube-apiserver's message
  `ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: <message>`;
- CEL variables: `object` (null on delete), `oldObject` (null on create), `request` (operation,
  userInfo.username/groups, namespace, name, resource, subResource, dryRun), `namespaceObject`
  (null for cluster-scoped objects), `params` (null), `variables` (the policy's `variables`);
- an expression that fails to compile or evaluate follows `failurePolicy` (Fail, the default:
  refused; Ignore: skipped); only the `Deny` validationAction refuses (Warn and Audit do nothing here).
Simplified: `paramKind`/`paramRef` are not supported (such a binding refuses with a clear message
under Fail); `messageExpression`, `auditAnnotations` and `objectSelector` are ignored; type checking
happens at evaluation, not when the policy is written.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import Any

import celpy

from nodeenv.kubeapi.auth import User
from nodeenv.kubeapi.errors import ApiError, Forbidden, from_code
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.store import Store
from nodeenv.kubelet.scheduler import matches as selector_matches

log = logging.getLogger(__name__)
Obj = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}


@dataclass(frozen=True, slots=True)
class Caller:
    user: User
    info: RequestInfo


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("kubeapi_caller", default=None)
"""Set by the HTTP edge for the request being served; writes the double makes itself have none."""


class PolicyError(Exception):
    pass


class Policies:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store, self.registry = store, registry
        self._env = celpy.Environment()
        self._programs: dict[str, Any] = {}

    def _kind(self, plural: str) -> Kind:
        kind = self.registry.lookup(GROUP, "v1", plural)
        assert kind is not None
        return kind

    def admit(self, operation: str, kind: Kind, new: Obj | None, old: Obj | None) -> None:
        """Raise the refusal of the first binding that denies this write (nothing for internal writes)."""
        caller = CALLER.get()
        if caller is None:
            return
        policies = {
            p["metadata"]["name"]: p for p in self.store.items(self._kind("validatingadmissionpolicies"))
        }
        if not policies:
            return
        obj = new if new is not None else old
        assert obj is not None
        ns_obj = self._namespace_object(kind, obj)
        for binding in self.store.items(self._kind("validatingadmissionpolicybindings")):
            spec = binding.get("spec") or {}
            policy = policies.get(spec.get("policyName", ""))
            if policy is None or "Deny" not in (spec.get("validationActions") or []):
                continue
            pspec = policy.get("spec") or {}
            if not _rules_match(pspec.get("matchConstraints") or {}, operation, kind, caller.info, ns_obj):
                continue
            if not _selects((spec.get("matchResources") or {}).get("namespaceSelector"), kind, ns_obj):
                continue
            self._validate(policy, binding, operation, kind, caller, new, old, ns_obj)

    def _namespace_object(self, kind: Kind, obj: Obj) -> Obj | None:
        if kind.group == "" and kind.plural == "namespaces":
            return obj
        ns = obj["metadata"].get("namespace")
        if not kind.namespaced or not ns:
            return None
        namespaces = self.registry.lookup("", "v1", "namespaces")
        assert namespaces is not None
        return self.store.get(namespaces, "", ns)

    def _validate(
        self,
        policy: Obj,
        binding: Obj,
        operation: str,
        kind: Kind,
        caller: Caller,
        new: Obj | None,
        old: Obj | None,
        ns_obj: Obj | None,
    ) -> None:
        pspec = policy.get("spec") or {}
        pname, bname = policy["metadata"]["name"], binding["metadata"]["name"]
        fail = pspec.get("failurePolicy", "Fail") != "Ignore"
        activation = _activation(operation, kind, caller, new, old, ns_obj, kind.namespaced)
        try:
            if pspec.get("paramKind") or (binding.get("spec") or {}).get("paramRef"):
                raise PolicyError("params are not supported by the API double")
            variables: dict[str, Any] = {}
            for v in pspec.get("variables") or []:
                variables[v["name"]] = self._eval(v["expression"], {**activation, "variables": variables})
            activation["variables"] = _cel_map(variables)
            for cond in pspec.get("matchConditions") or []:
                if self._eval(cond["expression"], activation) is not True:
                    return
            for check in pspec.get("validations") or []:
                if self._eval(check["expression"], activation) is not True:
                    raise _denied(kind, new or old, pname, bname, check)
        except ApiError:
            raise
        except (PolicyError, celpy.CELEvalError, celpy.CELParseError, KeyError, TypeError) as e:
            log.warning("ValidatingAdmissionPolicy %s: %s", pname, e)
            if fail:
                raise _denied(kind, new or old, pname, bname, {"message": f"expression error: {e}"}) from None

    def _eval(self, expression: str, activation: dict[str, Any]) -> Any:
        program = self._programs.get(expression)
        if program is None:
            program = self._env.program(self._env.compile(expression))
            self._programs[expression] = program
        result = program.evaluate(activation)
        if isinstance(result, celpy.CELEvalError):
            raise result
        if isinstance(result, celpy.celtypes.BoolType):
            return bool(result)
        return result


def _cel_map(values: dict[str, Any]) -> Any:
    return celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in values.items()})


def _activation(
    operation: str, kind: Kind, caller: Caller, new: Obj | None, old: Obj | None, ns_obj: Obj | None,
    namespaced: bool,
) -> dict[str, Any]:  # fmt: skip
    obj = new if new is not None else old
    assert obj is not None
    info = caller.info
    request = {
        "operation": operation,
        "userInfo": {"username": caller.user.name, "groups": list(caller.user.groups)},
        "name": obj["metadata"].get("name", ""),
        "namespace": obj["metadata"].get("namespace", "") if namespaced else "",
        "resource": {"group": kind.group, "version": kind.version, "resource": kind.plural},
        "subResource": info.subresource,
        "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
    }
    return {
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(request),
        "namespaceObject": celpy.json_to_cel(ns_obj),
        "params": celpy.json_to_cel(None),
    }


def _rules_match(constraints: Obj, operation: str, kind: Kind, info: RequestInfo, ns_obj: Obj | None) -> bool:
    resource = f"{kind.plural}/{info.subresource}" if info.subresource else kind.plural

    any_sub = f"{kind.plural}/*" if info.subresource else ""

    def has(rule: Obj, key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values or (key == "resources" and any_sub in values)

    hit = any(
        has(r, "apiGroups", kind.group) and has(r, "apiVersions", kind.version)
        and has(r, "resources", resource) and has(r, "operations", operation)
        for r in constraints.get("resourceRules") or []
    )  # fmt: skip
    return hit and _selects(constraints.get("namespaceSelector"), kind, ns_obj)


def _selects(selector: Obj | None, kind: Kind, ns_obj: Obj | None) -> bool:
    """A namespaceSelector: cluster-scoped objects other than Namespaces always match, as upstream."""
    if not selector:
        return True
    if ns_obj is None:
        return not kind.namespaced
    return selector_matches(selector, ns_obj["metadata"].get("labels") or {})


def _denied(kind: Kind, obj: Obj | None, policy: str, binding: str, check: Obj) -> ApiError:
    message = check.get("message") or f"failed expression: {check.get('expression', '')}"
    why = f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"
    name = (obj or {}).get("metadata", {}).get("name", "")
    resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
    reason = check.get("reason") or "Invalid"
    details = {"name": name, "group": kind.group, "kind": kind.plural}
    if reason == "Forbidden":
        return Forbidden(f'{resource} "{name}" is forbidden: {why}', details)
    if reason == "Invalid":
        return from_code(422, f'{kind.kind} "{name}" is invalid: : {why}')
    return from_code(_CODES.get(reason, 422), why)
