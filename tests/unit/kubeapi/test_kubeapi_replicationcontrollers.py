"""ReplicationController defaults and validation (replicationcontrollers.py) as kube-apiserver's."""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi import replicationcontrollers as rc


def _rc(
    selector: dict[str, str] | None, labels: dict[str, str], replicas: int | None = None
) -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "image": "busybox"}]}
    spec: dict[str, Any] = {"template": {"metadata": {"labels": labels}, "spec": pod}}
    if selector is not None:
        spec["selector"] = selector
    if replicas is not None:
        spec["replicas"] = replicas
    return {"metadata": {"name": "r"}, "spec": spec}


def test_defaults_from_the_template() -> None:
    obj = _rc(None, {"app": "a"})
    rc.apply_defaults(obj)
    assert obj["spec"]["replicas"] == 1 and obj["spec"]["selector"] == {"app": "a"}
    assert obj["metadata"]["labels"] == {"app": "a"}
    assert obj["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert rc.causes(obj) == []


def test_refusals() -> None:
    mismatch = _rc({"app": "b"}, {"app": "a"})
    rc.apply_defaults(mismatch)
    assert rc.causes(mismatch) == [("FieldValueInvalid", "spec.template.metadata.labels",
                                    'Invalid value: map[string]string{"app":"a"}: '
                                    "`selector` does not match template `labels`")]  # fmt: skip
    negative = _rc({"app": "a"}, {"app": "a"}, replicas=-1)
    assert rc.causes(negative)[0][:2] == ("FieldValueInvalid", "spec.replicas")
    assert rc.causes(_rc(None, {}))[0] == ("FieldValueRequired", "spec.selector", "Required value")
