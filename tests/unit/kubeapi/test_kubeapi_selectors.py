"""Label and field selectors with the apimachinery grammar and matching rules."""

from __future__ import annotations

import pytest

from nodeenv.kubeapi.errors import BadRequest
from nodeenv.kubeapi.kinds import Registry
from nodeenv.kubeapi.selectors import Selector, field_value, parse_fields, parse_labels

REG = Registry()
PODS = REG.lookup("", "v1", "pods")
CMS = REG.lookup("", "v1", "configmaps")
assert PODS is not None and CMS is not None


def obj(labels: dict[str, str] | None = None, **extra: object) -> dict[str, object]:
    return {"metadata": {"name": "p", "namespace": "ns", "labels": labels or {}}, **extra}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app!=web", {}, True),  # != matches objects without the key
        ("app!=web", {"app": "web"}, False),
        ("app in (web, db)", {"app": "db"}, True),
        ("app notin (web,db)", {}, True),
        ("app notin (web,db)", {"app": "web"}, False),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("!app", {}, True),
        ("app=web,tier in (a,b)", {"app": "web", "tier": "b"}, True),
        ("app=web,tier in (a,b)", {"app": "web"}, False),
        ("example.com/role=x", {"example.com/role": "x"}, True),
        ("n>3", {"n": "5"}, True),
        ("n<3", {"n": "5"}, False),
        ("", {"anything": "x"}, True),
    ],
)
def test_label_selector(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert Selector(parse_labels(selector)).matches(obj(labels)) is expected


@pytest.mark.parametrize("bad", ["app in ()", "app=web,=x", "a b", "n>x", "-bad=1"])
def test_malformed_label_selector_is_400(bad: str) -> None:
    with pytest.raises(BadRequest):
        parse_labels(bad)


def test_field_selectors_only_those_the_kind_supports() -> None:
    assert PODS is not None and CMS is not None
    terms = parse_fields("spec.nodeName=n1,status.phase!=Failed", PODS)
    pod = obj(spec={"nodeName": "n1"}, status={"phase": "Running"})
    assert Selector(fields=terms).matches(pod)
    assert not Selector(fields=terms).matches(obj(spec={"nodeName": "n2"}, status={"phase": "Running"}))
    with pytest.raises(BadRequest, match=r"field label not supported: spec\.nodeName"):
        parse_fields("spec.nodeName=n1", CMS)
    assert Selector(fields=parse_fields("metadata.namespace=ns", CMS)).matches(obj())


def test_field_values_of_booleans_and_missing_fields() -> None:
    assert field_value(obj(spec={}), "spec.hostNetwork") == "false"
    assert field_value(obj(spec={"hostNetwork": True}), "spec.hostNetwork") == "true"
    assert field_value(obj(), "status.phase") == ""


def test_exact_name_lets_the_store_skip_the_scan() -> None:
    assert CMS is not None
    assert Selector(fields=parse_fields("metadata.name=x", CMS)).exact_name() == "x"
    assert Selector(fields=parse_fields("metadata.name!=x", CMS)).exact_name() is None
