from __future__ import annotations

from controllers.resources import EndpointSlice, ObjectRef, Pod, Service

FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
SLICE_LABELS = {"kubernetes.io/service-name": "web"}


def test_service_full() -> None:
    s = Service.from_dict(
        {
            "metadata": {"namespace": "ns", "name": "web", "uid": "u", "resourceVersion": "7",
                         "annotations": {"a": "b"}, "finalizers": [FINALIZER],
                         "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"],
                     "ports": [{"name": "http", "port": 80, "targetPort": "web", "nodePort": 30080},
                               {"port": 53, "protocol": "UDP"}],
                     "loadBalancerClass": "fiberlb.plasmacloud.io/lb", "sessionAffinity": "ClientIP",
                     "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.100.3"}, {"hostname": "x"}]}},
        }
    )  # fmt: skip
    assert s.key == "ns/web" and s.cluster_ip == "10.96.0.9" and not s.headless and s.deleting
    assert s.ports[0].target_port == "web" and s.ports[0].protocol == "TCP" and s.ports[0].node_port == 30080
    assert s.ports[1].target_port == 53 and s.ports[1].protocol == "UDP"
    assert s.ingress_ips == ("192.168.100.3",)
    assert s.session_affinity_timeout == 60 and s.load_balancer_class == "fiberlb.plasmacloud.io/lb"


def test_service_minimal_and_headless() -> None:
    s = Service.from_dict({"metadata": {"namespace": "ns", "name": "h"}, "spec": {"clusterIP": "None"}})
    assert s.headless and s.cluster_ip == "" and s.type == "ClusterIP" and s.ports == ()
    assert s.session_affinity == "None" and not s.deleting


def test_endpoint_slice() -> None:
    sl = EndpointSlice.from_dict(
        {
            "metadata": {"namespace": "ns", "name": "web-abc", "labels": SLICE_LABELS},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "n1", "hostname": "h",
                           "targetRef": {"kind": "Pod", "namespace": "ns", "name": "p1", "uid": "pu"}},
                          {"addresses": ["10.0.0.2"], "conditions": {"ready": False}}],
            "ports": [{"name": "http", "port": 8080}],
        }
    )  # fmt: skip
    assert sl.service_key == "ns/web"
    a, b = sl.endpoints
    assert a.ready and a.serving and not a.terminating and a.node_name == "n1"
    assert a.target_ref == ObjectRef(kind="Pod", namespace="ns", name="p1", uid="pu")
    assert not b.ready and not b.serving
    assert sl.ports[0].protocol == "TCP" and sl.ports[0].port == 8080


def test_pod() -> None:
    p = Pod.from_dict(
        {
            "metadata": {"namespace": "ns", "name": "p", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"ports": [{"name": "web", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]},
        }
    )
    assert p.ips == ("10.0.0.1",) and p.ports[0].container_port == 8080 and p.labels == {"app": "web"}
