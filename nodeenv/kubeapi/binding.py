"""POST /api/v1/namespaces/<ns>/pods/<name>/binding: how kube-scheduler binds a Pod to a Node
(kube-apiserver's BindingREST): the Binding's `target` (a Node) becomes the Pod's spec.nodeName,
only while the Pod has none (409 Conflict on pods/binding "pod <name> is already assigned to node ..."
otherwise); the answer is a Success Status, 201."""

from __future__ import annotations

import copy
from typing import Any

from nodeenv.kubeapi.crud import Resources
from nodeenv.kubeapi.errors import BadRequest, Conflict, invalid
from nodeenv.kubeapi.kinds import Kind

Obj = dict[str, Any]


def bind(resources: Resources, kind: Kind, namespace: str, name: str, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise BadRequest("the body of the request was not a Binding")
    target = body.get("target") if isinstance(body.get("target"), dict) else {}
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise invalid(kind, name, [("FieldValueRequired", "target.name", "Required value")])
    pod = resources.get(kind, namespace, name)
    current = (pod.get("spec") or {}).get("nodeName")
    if current:  # as the pod registry's BindingREST: the resource it names is pods/binding
        why = f'pod {name} is already assigned to node "{current}"'
        raise Conflict(f'Operation cannot be fulfilled on pods/binding "{name}": {why}',
                       {"name": name, "kind": "pods/binding"})  # fmt: skip
    new = copy.deepcopy(pod)
    new["spec"]["nodeName"] = node
    resources.update(kind, namespace, name, new)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
