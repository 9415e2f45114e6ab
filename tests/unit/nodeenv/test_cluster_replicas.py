"""Reading the controllers' replicas out of the API's audit log: which replica sent a request (its
node's address, its program's user agent), and every write a replica made while another one (or
none) held its Lease, following the Lease through the successful writes to it."""

from __future__ import annotations

from nodeenv.cluster.replicas import replica_node, requests_by_replica, writes_while_not_leading

NODES = {"10.250.0.11": "node1", "10.250.0.12": "node2"}
UA = "{}/v0.1.0 (linux/amd64) k8shost"


def ev(
    node_ip: str, program: str, verb: str, resource: str, name: str = "", code: int = 200
) -> dict[str, object]:
    ref = {"resource": resource, "namespace": "kube-system", **({"name": name} if name else {})}
    return {"verb": verb, "sourceIPs": [node_ip], "userAgent": UA.format(program), "objectRef": ref,
            "responseStatus": {"code": code}, "requestURI": f"/{resource}/{name}",
            "stageTimestamp": "t"}  # fmt: skip


def lease(ip: str, verb: str = "update", code: int = 200) -> dict[str, object]:
    return ev(ip, "fiberlb-controller", verb, "leases", "fiberlb-controller", code)


ONE, TWO = "10.250.0.11", "10.250.0.12"


def test_the_holder_node_is_read_from_the_pod_name_in_the_identity() -> None:
    assert replica_node("netpol-controller", "netpol-controller-node2_3f2a-11") == "node2"
    assert replica_node("netpol-controller", "someone-else_1") == ""


def test_writes_by_the_holder_are_fine_and_a_followers_lease_attempts_too() -> None:
    log = [
        lease(ONE, "create", 201),
        ev(TWO, "fiberlb-controller", "get", "leases", "fiberlb-controller"),
        lease(TWO, "update", 409),  # tried while it was held: refused, still a follower
        ev(ONE, "fiberlb-controller", "patch", "services", "web"),
        ev(TWO, "flashdns-controller", "create", "events"),  # not a controller replica
        ev("127.0.0.1", "fiberlb-controller", "patch", "services", "web"),  # not from a node
    ]
    assert writes_while_not_leading(log, NODES) == []
    seen = requests_by_replica(log, NODES)
    assert seen[("fiberlb-controller", "node2")] == {"get leases": 1, "update leases": 1}


def test_a_followers_write_and_a_deposed_leaders_write_are_found() -> None:
    log = [
        lease(ONE, "create", 201),
        ev(TWO, "fiberlb-controller", "patch", "services", "web"),  # node2 never held it
        lease(TWO),  # node2 takes over
        ev(TWO, "fiberlb-controller", "patch", "services", "web"),
        ev(ONE, "fiberlb-controller", "delete", "services", "old"),  # node1 no longer holds it
        ev(ONE, "netpol-controller", "create", "events"),  # nobody ever held netpol's Lease
    ]
    found = writes_while_not_leading(log, NODES)
    assert [f.split(" at ")[0] for f in found] == [
        "fiberlb-controller on node2 (leader: node1) patch /services/web",
        "fiberlb-controller on node1 (leader: node2) delete /services/old",
        "netpol-controller on node1 (leader: none) create /events/",
    ]
