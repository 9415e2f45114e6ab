"""The `fiberlb` backend against the in-process FiberLB gRPC server (real gRPC on loopback)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from common.plasmacloud_grpc import secure_channel
from controllers.fiberlb.annotations import HealthCheck, LbOptions
from controllers.fiberlb.backend import BackendError
from controllers.fiberlb.desired import Backend, DesiredLB, Listener
from controllers.fiberlb.grpc_backend import GrpcBackend, UnsupportedProtocol
from controllers.fiberlb.ippool import RequestedIPUnavailable
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeFiberLB, FakeServer


@pytest.fixture
def server(fiberlb: FakeServer) -> FakeServer:
    return fiberlb


@pytest.fixture
def backend(server: FakeServer) -> Iterator[GrpcBackend]:
    b = GrpcBackend(server.endpoint, server.pki.client_auth(), org_id="org-1", project_id="p-1")
    yield b
    b.close()


def desired(ips: list[str], ip: str = "192.168.100.5", options: LbOptions | None = None,
            protocol: str = "TCP") -> DesiredLB:  # fmt: skip
    members = tuple(Backend(i, 8080) for i in ips)
    return DesiredLB(
        service="ns/web", uid="u1", namespace="ns", vips=(ip,) if ip else (), options=options or LbOptions(),
        listeners=(Listener(name="http", protocol=protocol, port=80, backends=members),
                   Listener(name="dns", protocol="UDP", port=53, backends=members)),
    )  # fmt: skip


def pools_of(fake: FakeFiberLB) -> dict[tuple[str, int], list[str]]:
    out = {}
    for lst in fake.listeners.values():
        out[(lst.protocol, lst.port)] = sorted(m.address for m in fake.pools[lst.default_pool_id].members)
    return out


def test_create_update_delete(server: FakeServer, backend: GrpcBackend) -> None:
    fake = server.fake
    lb_id = backend.apply(desired(["10.0.0.1", "10.0.0.2"], options=LbOptions(algorithm="least-conn"))).id
    (lb,) = fake.lbs.values()
    assert (lb.id, lb.name, lb.external_ip, lb.org_id, lb.project_id) == (
        lb_id, "ns/web", "192.168.100.5", "org-1", "p-1",
    )  # fmt: skip
    assert pools_of(fake) == {("TCP", 80): ["10.0.0.1", "10.0.0.2"], ("UDP", 53): ["10.0.0.1", "10.0.0.2"]}
    assert {p.algorithm for p in fake.pools.values()} == {"LEAST_CONNECTIONS"}

    fake.calls.clear()
    backend.apply(desired(["10.0.0.1", "10.0.0.2"], options=LbOptions(algorithm="least-conn")))
    assert "UpdatePool" not in fake.calls and "CreateListener" not in fake.calls  # nothing changed

    backend.apply(desired(["10.0.0.3"], options=LbOptions(affinity_timeout=60)))
    assert pools_of(fake) == {("TCP", 80): ["10.0.0.3"], ("UDP", 53): ["10.0.0.3"]}
    assert {(p.algorithm, p.session_affinity) for p in fake.pools.values()} == {("ROUND_ROBIN", "CLIENT_IP")}

    hc = HealthCheck(path="/healthz", interval=10, timeout=5, retries=3)
    backend.apply(desired(["10.0.0.3"], options=LbOptions(health_check=hc)))
    checks = {(x.health_check.type, x.health_check.path, x.health_check.unhealthy_threshold)
              for x in fake.listeners.values()}  # fmt: skip
    assert checks == {("HTTP", "/healthz", 3)}
    assert len(fake.pools) == 2  # replaced listeners took their old pools with them

    backend.delete("ns/web", "u1")
    assert fake.lbs == {} and fake.listeners == {} and fake.pools == {}
    backend.delete("ns/web", "u1")  # idempotent


def test_a_restarted_controller_adopts_by_name_and_by_id(server: FakeServer, backend: GrpcBackend) -> None:
    lb_id = backend.apply(desired(["10.0.0.1"])).id
    fresh = GrpcBackend(server.endpoint, server.pki.client_auth(), org_id="org-1", project_id="p-1")
    try:
        assert fresh.services() == {"ns/web"}
        assert fresh.apply(desired(["10.0.0.1", "10.0.0.2"])).id == lb_id  # by name: no duplicate
        assert len(server.fake.lbs) == 1
        server.fake.calls.clear()
        annotated = LbOptions(load_balancer_id=lb_id)
        assert (
            GrpcBackend(server.endpoint, server.pki.client_auth())
            .apply(desired(["10.0.0.2"], options=annotated))
            .id
            == lb_id
        )
        assert "ListLoadBalancers" not in server.fake.calls  # found through the annotation's id
    finally:
        fresh.close()


def test_a_new_external_ip_recreates_the_load_balancer(server: FakeServer, backend: GrpcBackend) -> None:
    old = backend.apply(desired(["10.0.0.1"])).id
    new = backend.apply(desired(["10.0.0.1"], ip="192.168.100.6")).id
    assert new != old and [lb.external_ip for lb in server.fake.lbs.values()] == ["192.168.100.6"]


def test_fiberlb_allocates_when_no_ip_is_given_and_refuses_a_taken_one(
    server: FakeServer, backend: GrpcBackend
) -> None:
    got = backend.apply(desired(["10.0.0.1"], ip=""))
    assert got.external_ip.startswith("203.0.113.")  # the server's own pool
    assert backend.apply(desired(["10.0.0.2"], ip="")).external_ip == got.external_ip  # kept
    other = DesiredLB(service="ns/other", uid="u2", namespace="ns", vips=(got.external_ip,), listeners=(),
                      options=LbOptions())  # fmt: skip
    with pytest.raises(RequestedIPUnavailable, match="refused external IP"):
        backend.apply(other)


def test_errors_carry_the_status_code(server: FakeServer, backend: GrpcBackend) -> None:
    with pytest.raises(UnsupportedProtocol, match="SCTP"):
        backend.apply(desired(["10.0.0.1"], protocol="SCTP"))
    server.fake.fail_next = grpc.StatusCode.UNAVAILABLE
    with pytest.raises(BackendError, match="UNAVAILABLE"):
        backend.apply(desired(["10.0.0.1"]))
    with pytest.raises(BackendError, match="INVALID_ARGUMENT"):
        backend.apply(desired(["not-an-ip"]))


def test_the_fake_answers_real_status_codes(server: FakeServer) -> None:
    from protos import fiberlb_pb2, fiberlb_pb2_grpc

    stub = fiberlb_pb2_grpc.LoadBalancerServiceStub(secure_channel(server.endpoint, server.pki.client_auth()))
    lb = stub.CreateLoadBalancer(fiberlb_pb2.CreateLoadBalancerRequest(name="a"))
    assert lb.external_ip  # allocated by the server when none is given

    def code(fn, req) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
        with pytest.raises(grpc.RpcError) as info:
            fn(req)
        return info.value.code()

    assert (
        code(stub.CreateLoadBalancer, fiberlb_pb2.CreateLoadBalancerRequest(name="a"))
        == grpc.StatusCode.ALREADY_EXISTS
    )
    assert (
        code(stub.GetLoadBalancer, fiberlb_pb2.GetLoadBalancerRequest(load_balancer_id="x"))
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        code(
            stub.CreateListener,
            fiberlb_pb2.CreateListenerRequest(load_balancer_id=lb.id, protocol="QUIC", port=1),
        )
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    pool = stub.CreatePool(fiberlb_pb2.CreatePoolRequest(load_balancer_id=lb.id))
    stub.CreateListener(
        fiberlb_pb2.CreateListenerRequest(
            load_balancer_id=lb.id, protocol="TCP", port=80, default_pool_id=pool.id
        )
    )
    assert (
        code(stub.DeletePool, fiberlb_pb2.DeletePoolRequest(pool_id=pool.id))
        == grpc.StatusCode.FAILED_PRECONDITION
    )
    assert code(stub.ListLoadBalancers, fiberlb_pb2.ListLoadBalancersRequest(page_token="zz")) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    stub.DeletePool(fiberlb_pb2.DeletePoolRequest(pool_id="missing"))  # deleting a missing one is fine
