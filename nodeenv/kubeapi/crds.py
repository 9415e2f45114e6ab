"""CustomResourceDefinitions (apiextensions.k8s.io/v1): defaults, validation, the status the
apiextensions controllers write, and the kinds a CRD makes the double serve.

Defaults: names.singular (the lowercased kind), names.listKind (<kind>List), conversion
{strategy: None}. Validated (422): metadata.name is <plural>.<group>; group has a dot; names.plural
and names.kind; scope Cluster or Namespaced (immutable); at least one version, exactly one of them
the storage version, each with an openAPIV3Schema of type object.
Status, set at once (a real apiserver takes a moment): acceptedNames = names, conditions
NamesAccepted and Established True, storedVersions gaining the storage version.
Each served version becomes a Kind with the CRD's schema and printer columns; discovery, OpenAPI,
routing and watches see it from the next request, and deleting the CRD deletes its objects.
Simplified: no conversion between served versions (an object is stored and served in the version it
was last written in; one storage per resource), no names-conflict check against other CRDs or
built-in resources, no scale subresource, no Terminating phase on delete.
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi.kinds import Kind

Obj = dict[str, Any]
Cause = tuple[str, str, str]


def apply_defaults(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})


def _version_causes(versions: Any) -> list[Cause]:
    if not isinstance(versions, list) or not versions:
        why = "Required value: must have exactly one version marked as storage version"
        return [("FieldValueRequired", "spec.versions", why)]
    out: list[Cause] = []
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
    if len(storage) != 1:
        out.append(("FieldValueInvalid", "spec.versions",
                    "Invalid value: must have exactly one version marked as storage version"))  # fmt: skip
    for i, v in enumerate(versions):
        v = v if isinstance(v, dict) else {}
        if not v.get("name"):
            out.append(("FieldValueRequired", f"spec.versions[{i}].name", "Required value"))
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        at = f"spec.versions[{i}].schema.openAPIV3Schema"
        if not isinstance(schema, dict):
            out.append(("FieldValueRequired", at, "Required value: schemas are required"))
        elif schema.get("type") != "object":
            out.append(
                ("FieldValueInvalid", f"{at}.type", 'Unsupported value: "": supported values: "object"')
            )
    return out


def causes(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    assert isinstance(names, dict)
    group, plural = spec.get("group") or "", names.get("plural") or ""
    out: list[Cause] = []
    name = obj["metadata"].get("name", "")
    if name != f"{plural}.{group}":
        out.append(("FieldValueInvalid", "metadata.name",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))  # fmt: skip
    if not group:
        out.append(("FieldValueRequired", "spec.group", "Required value"))
    elif "." not in group:
        out.append(("FieldValueInvalid", "spec.group",
                    f'Invalid value: "{group}": should be a domain with at least one dot'))  # fmt: skip
    out += [("FieldValueRequired", f"spec.names.{f}", "Required value") for f in ("plural", "kind")
            if not names.get(f)]  # fmt: skip
    scope = spec.get("scope")
    if scope not in ("Cluster", "Namespaced"):
        out.append(("FieldValueNotSupported", "spec.scope",
                    f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"'))  # fmt: skip
    elif old is not None and (old.get("spec") or {}).get("scope") != scope:
        out.append(("FieldValueInvalid", "spec.scope", f'Invalid value: "{scope}": field is immutable'))
    return out + _version_causes(spec.get("versions"))


def storage_version(obj: Obj) -> str:
    return next(str(v["name"]) for v in obj["spec"]["versions"] if v.get("storage"))


def with_status(obj: Obj, old: Obj | None, now: str) -> None:
    """What the naming and establishing controllers write once the names are accepted."""
    stored = list(((old or {}).get("status") or {}).get("storedVersions") or [])
    if storage_version(obj) not in stored:
        stored.append(storage_version(obj))
    obj["status"] = {
        "acceptedNames": obj["spec"]["names"],
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored,
    }  # fmt: skip


def kinds_of(obj: Obj) -> list[Kind]:
    """One Kind per served version."""
    spec, names = obj["spec"], obj["spec"]["names"]
    out = []
    for v in spec["versions"]:
        if not v.get("served"):
            continue
        subresources = v.get("subresources") or {}
        out.append(Kind(
            group=spec["group"], version=v["name"], kind=names["kind"], plural=names["plural"],
            namespaced=spec["scope"] == "Namespaced", short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()), status="status" in subresources,
            generation=True, schema=(v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"},
            columns=tuple(v.get("additionalPrinterColumns") or ()),
        ))  # fmt: skip
    return out
