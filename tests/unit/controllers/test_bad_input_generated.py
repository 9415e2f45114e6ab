"""Generated malformed Services, EndpointSlices, Pods and NetworkPolicies (Hypothesis) through the
functions the controllers read them with: valid objects with any field dropped or given any JSON
value (wrong types included), anywhere in the object.

Each either parses, or raises the one error its controller turns into a Warning Event
(MalformedObject, ServiceConfigError, InvalidPolicy): never a TypeError, KeyError or the like,
which would fail a reconcile with a traceback (netpol: every policy of the node, not only the
bad one) or break an informer's index.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import example, given

from controllers.fiberlb.annotations import LbOptions, ServiceConfigError
from controllers.fiberlb.desired import desired_lb
from controllers.fiberlb.reconcile import slice_service_key
from controllers.flashdns.records import pod_records, service_records
from controllers.netpol.policy import InvalidPolicy, parse_policy
from controllers.resources import EndpointSlice, MalformedObject, Pod, Service
from tests.bad_input import deep_mutated, edge_settings

SERVICE: dict[str, Any] = {
    "metadata": {"namespace": "default", "name": "web", "uid": "u1", "resourceVersion": "7",
                 "annotations": {"lb.plasmacloud.io/health-check-interval": "5s"}, "labels": {"app": "web"}},
    "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
             "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                       {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": "dns"}],
             "selector": {"app": "web"}, "sessionAffinity": "ClientIP",
             "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}},
    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}},
}  # fmt: skip
SLICE: dict[str, Any] = {
    "metadata": {"namespace": "default", "name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": True}, "hostname": "w0",
                   "targetRef": {"kind": "Pod", "namespace": "default", "name": "w0", "uid": "p"}}],
    "ports": [{"name": "http", "protocol": "TCP", "port": 8080},
              {"name": "dns", "protocol": "UDP", "port": 53}],
}  # fmt: skip
POD: dict[str, Any] = {
    "metadata": {"namespace": "default", "name": "w0", "uid": "p", "labels": {"app": "web"}},
    "spec": {
        "nodeName": "n1",
        "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}],
    },
    "status": {"phase": "Running", "podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}]},
}
POLICY: dict[str, Any] = {
    "metadata": {"namespace": "default", "name": "allow-web"},
    "spec": {
        "podSelector": {"matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}},
                              {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                     "ports": [{"protocol": "TCP", "port": 80, "endPort": 90}, {"port": "http"}]}],
        "egress": [{"to": [{"namespaceSelector": {}}], "ports": [{"protocol": "UDP", "port": 53}]}],
    },
}  # fmt: skip


def _with(base: dict[str, Any], path: tuple[Any, ...], value: object) -> dict[str, Any]:
    out = json.loads(json.dumps(base))
    parent = out
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return out


@edge_settings(max_examples=300)
@given(svc_obj=deep_mutated(SERVICE), slice_obj=deep_mutated(SLICE))
# the informer's index function parsed the whole slice: a port [1] raised TypeError there, which the
# informer does not retry (its task died); a port "eighty" failed the reconcile with a bare ValueError
@example(
    svc_obj=_with(SERVICE, ("spec", "ports", 0, "port"), "eighty"),
    slice_obj=_with(SLICE, ("ports", 0, "port"), [1]),
)
def test_fiberlb_reads_malformed_services_and_slices_with_a_config_error(
    svc_obj: dict[str, Any], slice_obj: dict[str, Any]
) -> None:
    slice_service_key(slice_obj)  # the informer's index function never raises
    try:
        svc = Service.from_dict(svc_obj)
        slices = [EndpointSlice.from_dict(slice_obj)]
        desired_lb(svc, slices, ["192.0.2.10"], LbOptions.from_service(svc))
    except (MalformedObject, ServiceConfigError):
        pass


@edge_settings(max_examples=300)
@given(svc_obj=deep_mutated(SERVICE), slice_obj=deep_mutated(SLICE), pod_obj=deep_mutated(POD))
def test_flashdns_reads_malformed_objects_with_a_malformed_object_error(
    svc_obj: dict[str, Any], slice_obj: dict[str, Any], pod_obj: dict[str, Any]
) -> None:
    for headless in (False, True):
        if headless and isinstance(svc_obj.get("spec"), dict):
            svc_obj["spec"]["clusterIPs"] = ["None"]
        with contextlib.suppress(MalformedObject):
            service_records(Service.from_dict(svc_obj), [EndpointSlice.from_dict(slice_obj)], "cluster.local")
    with contextlib.suppress(MalformedObject):
        pod_records(Pod.from_dict(pod_obj), "cluster.local")


@edge_settings(max_examples=400)
@given(obj=deep_mutated(POLICY))
def test_netpol_parses_malformed_policies_or_names_the_bad_field(obj: dict[str, Any]) -> None:
    try:
        parse_policy(obj)
    except InvalidPolicy as e:
        assert str(e), obj
