"""A PodSpec and its metadata as the checks read them (the JSON the API holds), and the
message helpers every check shares (policy/helpers.go, policy/visitor.go)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Violation:
    """A check's refusal: the short reason always shown, the detail in parentheses when set."""

    reason: str
    detail: str = ""


Check = Callable[[Obj, Obj], "Violation | None"]
"""(pod metadata, pod spec) → None when the pod passes."""


def dig(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]..., None where a step is missing or not a mapping."""
    for k in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(k)
    return obj


def items(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return [x for x in value if isinstance(x, Mapping)] if isinstance(value, list) else []


def containers(spec: Obj) -> Iterator[Obj]:
    """Init containers, containers, then ephemeral containers (visitContainers' order)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from items(spec, key)


def sc(c: Obj) -> Obj:
    """A container's securityContext ({} when unset)."""
    value = c.get("securityContext")
    return value if isinstance(value, Mapping) else {}


def name(c: Obj) -> str:
    return str(c.get("name") or "")


def join_quote(values: list[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def plural(singular: str, many: str, count: int) -> str:
    return singular if count == 1 else many


def containers_phrase(names: list[str]) -> str:
    """`container "a"` / `containers "a", "b"`."""
    return f"{plural('container', 'containers', len(names))} {join_quote(names)}"


def containers_violation(reason: str, bad: list[str], rule: str) -> Violation | None:
    """`container "a" <rule>` / `containers "a", "b" <rule>` when any container is bad."""
    return Violation(reason, f"{containers_phrase(bad)} {rule}") if bad else None


def uses(subject: str, names: list[str], thing: str, count: int, listed: str) -> str:
    """`container "a" uses hostPort 80`, `volumes "a", "b" use restricted volume types "x", "y"`."""
    who = f"{plural(subject, subject + 's', len(names))} {join_quote(names)}"
    return f"{who} {plural('uses', 'use', len(names))} {plural(thing, thing + 's', count)} {listed}"


def go_quote(text: str) -> str:
    """Go's %q for the printable text these messages quote."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def windows(spec: Obj) -> bool:
    return bool(dig(spec, "os", "name") == "windows")


def user_namespace(spec: Obj) -> bool:
    """hostUsers: false (relaxPolicyForUserNamespacePod)."""
    return spec.get("hostUsers") is False


def setters(pod_bad: bool, bad_containers: list[str]) -> list[str]:
    """["pod", 'containers "a", "b"'] as far as each is bad."""
    out = ["pod"] if pod_bad else []
    if bad_containers:
        out.append(containers_phrase(bad_containers))
    return out
