"""The `fiberlb` backend: PlasmaCloud's LoadBalancerService (protos/fiberlb.proto) over gRPC.

One FiberLB load balancer per Service, named `<namespace>/<name>`, with the external IP the
controller allocated; per Service port one pool (members = endpoints, algorithm, session
affinity) and one listener (protocol, port, health check) using it. A load balancer is found
again by the `load-balancer-id` annotation (the reconciler stores the id there, as the spec
says) or else by name through ListLoadBalancers, so a restarted controller adopts what exists
instead of creating duplicates. Listeners cannot be updated: a changed health check replaces
the listener; a changed member list or algorithm is one UpdatePool. Calls go over TLS with an IAM
token (common/plasmacloud_grpc.py); a refused token is a BackendError like any other (the reconciler
emits its Event and retries with backoff).
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from common.plasmacloud_grpc import PlasmaCloudAuth, secure_channel
from controllers.fiberlb.annotations import HealthCheck, ServiceConfigError
from controllers.fiberlb.backend import Applied, BackendError
from controllers.fiberlb.desired import DesiredLB, Listener
from controllers.fiberlb.ippool import RequestedIPUnavailable
from protos import fiberlb_pb2, fiberlb_pb2_grpc

log = logging.getLogger(__name__)
RPC_TIMEOUT = 10.0
DESCRIPTION = "Kubernetes Service (fiberlb-controller)"
ALGORITHM = {"round-robin": "ROUND_ROBIN", "least-conn": "LEAST_CONNECTIONS", "ip-hash": "SOURCE_IP"}


class UnsupportedProtocol(ServiceConfigError):
    reason = "UnsupportedProtocol"


def _health(hc: HealthCheck | None) -> Any:
    if hc is None:
        return None
    return fiberlb_pb2.HealthCheck(
        type="HTTP" if hc.path else "TCP",
        path=hc.path,
        interval_seconds=max(1, round(hc.interval)),
        timeout_seconds=max(1, round(hc.timeout)),
        healthy_threshold=1,
        unhealthy_threshold=hc.retries,
    )


def _members(lst: Listener) -> list[Any]:
    return [fiberlb_pb2.PoolMember(address=b.ip, port=b.port, weight=1) for b in lst.backends]


class GrpcBackend:
    """Load balancers in FiberLB (see module doc)."""

    name = "fiberlb"
    programs_cluster_ips = False
    shares_ips = False
    """FiberLB has one load balancer per external IP."""
    allocates_ips = True
    """CreateLoadBalancer with no external_ip allocates from FiberLB's pool (the spec)."""

    def __init__(self, endpoint: str, auth: PlasmaCloudAuth, org_id: str = "", project_id: str = "") -> None:
        self.endpoint, self.org_id, self.project_id = endpoint, org_id, project_id
        self._channel = secure_channel(endpoint, auth)
        self._stub = fiberlb_pb2_grpc.LoadBalancerServiceStub(self._channel)
        self._ids: dict[str, str] = {}
        """Service → load balancer id, learned from creates and listings."""

    def _call(self, method: str, request: Any, *, missing_ok: bool = False) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=RPC_TIMEOUT)
        except grpc.RpcError as e:
            if missing_ok and e.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise BackendError(f"FiberLB {method} failed: {e.code().name}: {e.details()}") from e

    def _list(self) -> list[Any]:
        out, token = [], ""
        while True:
            page = self._call(
                "ListLoadBalancers",
                fiberlb_pb2.ListLoadBalancersRequest(
                    page_size=500, page_token=token, org_id=self.org_id, project_id=self.project_id
                ),
            )
            out.extend(page.load_balancers)
            token = page.next_page_token
            if not token:
                return out

    def _find(self, service: str, lb_id: str = "") -> Any:
        for candidate in (lb_id, self._ids.get(service, "")):
            if candidate:
                lb = self._call(
                    "GetLoadBalancer",
                    fiberlb_pb2.GetLoadBalancerRequest(load_balancer_id=candidate),
                    missing_ok=True,
                )
                if lb is not None and lb.name == service:
                    self._ids[service] = lb.id
                    return lb
        for lb in self._list():
            if lb.name == service:
                self._ids[service] = lb.id
                return lb
        return None

    def apply(self, desired: DesiredLB) -> Applied:
        bad = sorted({x.protocol for x in desired.listeners} - {"TCP", "UDP"})
        if bad:
            raise UnsupportedProtocol(f"FiberLB listeners speak TCP and UDP only, not {', '.join(bad)}")
        ip = desired.vips[0] if desired.vips else ""
        lb = self._find(desired.service, desired.options.load_balancer_id)
        if lb is not None and ip and lb.external_ip != ip:
            log.info(
                "%s moves from %s to %s: recreating its load balancer", desired.service, lb.external_ip, ip
            )
            self._delete_lb(desired.service, lb.id)
            lb = None
        if lb is None:
            lb = self._create(desired, ip)
        self._sync_listeners(lb, desired)
        return Applied(str(lb.id), str(lb.external_ip))

    def _create(self, desired: DesiredLB, ip: str) -> Any:
        request = fiberlb_pb2.CreateLoadBalancerRequest(
            name=desired.service, description=f"{DESCRIPTION} uid={desired.uid}", external_ip=ip,
            org_id=self.org_id, project_id=self.project_id,
        )  # fmt: skip
        try:
            lb = self._stub.CreateLoadBalancer(request, timeout=RPC_TIMEOUT)
        except grpc.RpcError as e:
            if ip and e.code() == grpc.StatusCode.ALREADY_EXISTS:  # the name was not found: the IP is taken
                raise RequestedIPUnavailable(f"FiberLB refused external IP {ip}: {e.details()}") from e
            raise BackendError(f"FiberLB CreateLoadBalancer failed: {e.code().name}: {e.details()}") from e
        self._ids[desired.service] = lb.id
        return lb

    def _sync_listeners(self, lb: Any, desired: DesiredLB) -> None:
        health = _health(desired.options.health_check)
        want = {(x.protocol, x.port): x for x in desired.listeners}
        have = {}
        for current in lb.listeners:
            key = (current.protocol, current.port)
            same_hc = (current.health_check if current.HasField("health_check") else None) == health
            if key in want and key not in have and same_hc:
                have[key] = current
                continue
            self._call("DeleteListener", fiberlb_pb2.DeleteListenerRequest(listener_id=current.id))
            self._call("DeletePool", fiberlb_pb2.DeletePoolRequest(pool_id=current.default_pool_id))
        algorithm = ALGORITHM[desired.options.algorithm]
        affinity = "CLIENT_IP" if desired.options.affinity_timeout else "NONE"
        for key, lst in want.items():
            if key in have:
                self._sync_pool(have[key].default_pool_id, lst, algorithm, affinity)
                continue
            pool = self._call(
                "CreatePool",
                fiberlb_pb2.CreatePoolRequest(
                    load_balancer_id=lb.id,
                    algorithm=algorithm,
                    members=_members(lst),
                    session_affinity=affinity,
                ),
            )
            req = fiberlb_pb2.CreateListenerRequest(
                load_balancer_id=lb.id, protocol=lst.protocol, port=lst.port, default_pool_id=pool.id
            )
            if health is not None:
                req.health_check.CopyFrom(health)
            self._call("CreateListener", req)

    def _sync_pool(self, pool_id: str, lst: Listener, algorithm: str, affinity: str) -> None:
        pool = self._call("GetPool", fiberlb_pb2.GetPoolRequest(pool_id=pool_id))
        members = _members(lst)
        current = sorted((m.address, m.port, m.weight or 1) for m in pool.members)
        if (current, pool.algorithm, pool.session_affinity) == (
            sorted((m.address, m.port, m.weight) for m in members), algorithm, affinity,
        ):  # fmt: skip
            return
        self._call(
            "UpdatePool",
            fiberlb_pb2.UpdatePoolRequest(
                pool_id=pool_id, members=members, algorithm=algorithm, session_affinity=affinity
            ),
        )

    def delete(self, service: str, uid: str) -> None:
        lb = self._find(service)
        if lb is not None:
            self._delete_lb(service, lb.id)

    def _delete_lb(self, service: str, lb_id: str) -> None:
        self._call("DeleteLoadBalancer", fiberlb_pb2.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
        self._ids.pop(service, None)

    def services(self) -> set[str]:
        return {lb.name for lb in self._list() if lb.description.startswith(DESCRIPTION)}

    def close(self) -> None:
        self._channel.close()
