"""Opt-in ResourceQuota object counts: admission refuses what would exceed, status follows usage."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nodeenv.kubeapi.crud import DeleteOptions, Resources
from nodeenv.kubeapi.errors import Forbidden
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.store import Store

REG = Registry()


def kind(plural: str) -> Kind:
    k = REG.lookup("", "v1", plural)
    assert k is not None
    return k


SVC, CM, QUOTA = kind("services"), kind("configmaps"), kind("resourcequotas")


@pytest.fixture
def res() -> Resources:
    r = Resources(Store(), REG, quotas=True)
    r.bootstrap()
    hard = {"services.loadbalancers": "1", "count/configmaps": "2", "requests.cpu": "2"}
    r.create(QUOTA, "default", {"metadata": {"name": "q"}, "spec": {"hard": hard}})
    return r


def svc(name: str, type_: str = "ClusterIP") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": type_, "ports": [{"port": 80}]}}


def test_load_balancer_count_is_enforced_and_allocations_given_back(res: Resources) -> None:
    res.create(SVC, "default", svc("lb1", "LoadBalancer"))
    expected = ("exceeded quota: q, requested: services.loadbalancers=1, used: services.loadbalancers=1, "
                "limited: services.loadbalancers=1")  # fmt: skip
    with pytest.raises(Forbidden, match=re.escape(expected)):
        res.create(SVC, "default", svc("lb2", "LoadBalancer"))
    assert len(res.services.ips.ints.used) == 2  # kubernetes + lb1: lb2's ClusterIP was given back
    cip = res.create(SVC, "default", svc("plain"))
    with pytest.raises(Forbidden):
        res.update(SVC, "default", "plain", {**cip, "spec": {**cip["spec"], "type": "LoadBalancer"}})
    res.delete(SVC, "default", "lb1", DeleteOptions())
    res.create(SVC, "default", svc("lb2", "LoadBalancer"))


def test_status_follows_usage(res: Resources) -> None:
    res.create(CM, "default", {"metadata": {"name": "a"}})
    status = res.get(QUOTA, "default", "q")["status"]
    assert status["used"]["count/configmaps"] == "1" and status["hard"]["requests.cpu"] == "2"
    res.create(CM, "default", {"metadata": {"name": "b"}})
    with pytest.raises(Forbidden, match="count/configmaps"):
        res.create(CM, "default", {"metadata": {"name": "c"}})
    res.create(CM, "kube-system", {"metadata": {"name": "c"}})  # no quota there
    assert res.get(QUOTA, "default", "q")["status"]["used"]["count/configmaps"] == "2"
