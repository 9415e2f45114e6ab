"""Label and field selectors with the grammar of k8s.io/apimachinery (labels.Parse, fields.ParseSelector).

Labels: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, comma-joined
(all must hold). As in the real matcher, `!=` and `notin` also match objects without the key.
Fields: `f=v`, `f==v`, `f!=v`, comma-joined, `\\` escapes `,`/`=`/`!`; only the fields the kind
registers are accepted, others are a 400 `field label not supported: <f>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodeenv.kubeapi.errors import BadRequest
from nodeenv.kubeapi.kinds import Kind

_KEY = re.compile(r"^([a-z0-9A-Z]([-a-z0-9A-Z.]*[a-z0-9A-Z])?/)?[a-z0-9A-Z]([-_.a-z0-9A-Z]*[a-z0-9A-Z])?$")
_SET = re.compile(r"^\s*(?P<key>[^\s!=<>(),]+)\s+(?P<op>in|notin)\s*\((?P<vals>[^)]*)\)\s*$")
_CMP = re.compile(r"^\s*(?P<key>[^\s!=<>]+)\s*(?P<op>==|=|!=|<|>)\s*(?P<val>[^\s]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=<>(),]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "<", ">"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has, value = self.key in labels, labels.get(self.key)
        match self.op:
            case "exists":
                return has
            case "!":
                return not has
            case "=" | "in":
                return has and value in self.values
            case "!=" | "notin":
                return not has or value not in self.values
        if not has or value is None:
            return False
        try:
            n, bound = int(value), int(next(iter(self.values)))
        except ValueError:
            return False
        return n < bound if self.op == "<" else n > bound


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str, whole: str) -> str:
    if not _KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise BadRequest(f"unable to parse requirement: invalid label key {key!r} in {whole!r}")
    return key


def _requirement(part: str, whole: str) -> Requirement:
    if m := _SET.match(part):
        vals = frozenset(v.strip() for v in m["vals"].split(",") if v.strip())
        if not vals:
            raise BadRequest(
                "unable to parse requirement: for 'in', 'notin' operators, "
                f"values set can't be empty: {whole!r}"
            )
        return Requirement(_check_key(m["key"], whole), m["op"], vals)
    if m := _CMP.match(part):
        op = "=" if m["op"] == "==" else m["op"]
        if op in "<>" and not m["val"].lstrip("-").isdigit():
            raise BadRequest(
                "unable to parse requirement: for 'Gt', 'Lt' operators, "
                f"the value must be an integer: {whole!r}"
            )
        return Requirement(_check_key(m["key"], whole), op, frozenset((m["val"],)))
    if m := _EXISTS.match(part):
        return Requirement(_check_key(m["key"], whole), "!" if m["neg"] else "exists")
    raise BadRequest(f"unable to parse requirement: {part!r} in {whole!r}")


def parse_labels(text: str | None) -> tuple[Requirement, ...]:
    if not text or not text.strip():
        return ()
    return tuple(_requirement(p, text) for p in _split_top(text))


def labels_match(reqs: tuple[Requirement, ...], obj: Mapping[str, Any]) -> bool:
    if not reqs:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


@dataclass(frozen=True, slots=True)
class FieldTerm:
    field: str
    value: str
    negate: bool


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def parse_fields(text: str | None, kind: Kind) -> tuple[FieldTerm, ...]:
    if not text or not text.strip():
        return ()
    terms = []
    for part in re.split(r"(?<!\\),", text):
        m = re.match(r"^(?P<f>[^=!]+?)\s*(?P<op>==|=|!=)(?P<v>.*)$", part.strip())
        if not m:
            raise BadRequest(f"invalid selector: '{text}'; can't understand '{part}'")
        field = m["f"].strip()
        if field not in kind.selectable_fields:
            raise BadRequest(f"field label not supported: {field}")
        terms.append(FieldTerm(field, _unescape(m["v"]), m["op"] == "!="))
    return tuple(terms)


def _bool_text(v: Any) -> str:
    return "true" if v else "false"


_SPECIAL: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "spec.hostNetwork": lambda o: _bool_text(o.get("spec", {}).get("hostNetwork")),
    "spec.unschedulable": lambda o: _bool_text(o.get("spec", {}).get("unschedulable")),
    "source": lambda o: str((o.get("source") or {}).get("component", "")),
    "status.podIPs": lambda o: ",".join(i.get("ip", "") for i in (o.get("status") or {}).get("podIPs") or []),
}


def field_value(obj: Mapping[str, Any], field: str) -> str:
    if field in _SPECIAL:
        return _SPECIAL[field](obj)
    cur: Any = obj
    for part in field.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def fields_match(terms: tuple[FieldTerm, ...], obj: Mapping[str, Any]) -> bool:
    return all((field_value(obj, t.field) == t.value) != t.negate for t in terms)


@dataclass(frozen=True, slots=True)
class Selector:
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldTerm, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return labels_match(self.labels, obj) and fields_match(self.fields, obj)

    @property
    def everything(self) -> bool:
        return not self.labels and not self.fields

    def exact_name(self) -> str | None:
        """metadata.name=x: lets the store look one object up instead of scanning."""
        for t in self.fields:
            if t.field == "metadata.name" and not t.negate:
                return t.value
        return None
