from __future__ import annotations

import pytest

from controllers.fiberlb.ippool import (
    IpPool,
    PoolExhausted,
    Request,
    RequestedIPUnavailable,
    parse_pools,
)

TCP80 = frozenset({("TCP", 80)})
TCP443 = frozenset({("TCP", 443)})


@pytest.mark.parametrize(
    ("text", "size", "first"),
    [
        ("192.168.100.0/24", 254, "192.168.100.1"),
        ("10.0.0.10-10.0.0.12", 3, "10.0.0.10"),
        ("10.0.0.8/31", 2, "10.0.0.8"),
        ("10.0.0.5/32", 1, "10.0.0.5"),
        ("10.0.0.4/30, 10.1.0.1-10.1.0.2", 4, "10.0.0.5"),
    ],
)
def test_pool_syntax(text: str, size: int, first: str) -> None:
    pool = IpPool.from_text(text)
    assert pool.size == size
    assert pool.assign("ns/a", Request()) == first


@pytest.mark.parametrize("text", ["10.0.0.0/33", "10.0.0.9-10.0.0.1", "nonsense", "10.0.0.1-x"])
def test_bad_pool_syntax(text: str) -> None:
    with pytest.raises(ValueError, match="bad external IP pool"):
        parse_pools(text)


def test_several_pools_fill_in_order_then_exhaust() -> None:
    pool = IpPool.from_text("10.0.0.1-10.0.0.2,10.0.1.1-10.0.1.1")
    got = [pool.assign(f"ns/s{i}", Request()) for i in range(3)]
    assert got == ["10.0.0.1", "10.0.0.2", "10.0.1.1"]
    with pytest.raises(PoolExhausted, match="3 of 3 in use") as info:
        pool.assign("ns/s3", Request())
    assert info.value.reason == "IPPoolExhausted"
    pool.release("ns/s1")
    assert pool.assign("ns/s3", Request()) == "10.0.0.2"  # the pending Service gets the freed IP


def test_assign_is_stable() -> None:
    pool = IpPool.from_text("10.0.0.0/29")
    ip = pool.assign("ns/a", Request())
    pool.assign("ns/b", Request())
    assert pool.assign("ns/a", Request()) == ip


def test_requested_ip() -> None:
    pool = IpPool.from_text("10.0.0.0/29")
    assert pool.assign("ns/a", Request(requested_ip="10.0.0.5")) == "10.0.0.5"
    with pytest.raises(RequestedIPUnavailable, match="in use by ns/a"):
        pool.assign("ns/b", Request(requested_ip="10.0.0.5"))
    with pytest.raises(RequestedIPUnavailable, match="not in any external IP pool"):
        pool.assign("ns/b", Request(requested_ip="10.9.9.9"))
    assert pool.lookup("ns/b") == ""
    # changing the request moves the Service and frees the old IP
    assert pool.assign("ns/a", Request(requested_ip="10.0.0.6")) == "10.0.0.6"
    assert pool.holders("10.0.0.5") == []


@pytest.mark.parametrize(
    ("key_a", "ports_a", "key_b", "ports_b", "shared"),
    [
        ("k", TCP80, "k", TCP443, True),
        ("k", TCP80, "k", TCP80, False),  # same port
        ("k", TCP80, "other", TCP443, False),  # different keys
        ("", TCP80, "", TCP443, False),  # nobody asked
        ("k", TCP80, "", TCP443, False),  # only one asked
        ("k", TCP80, "k", frozenset({("UDP", 80)}), True),
    ],
)
def test_sharing(key_a: str, ports_a: frozenset[tuple[str, int]], key_b: str,
                 ports_b: frozenset[tuple[str, int]], shared: bool) -> None:  # fmt: skip
    pool = IpPool.from_text("10.0.0.1-10.0.0.4")
    a = pool.assign("ns/a", Request(sharing_key=key_a, ports=ports_a))
    b = pool.assign("ns/b", Request(sharing_key=key_b, ports=ports_b))
    assert (a == b) is shared
    if shared:
        assert pool.holders(a) == ["ns/a", "ns/b"]
        pool.release("ns/a")
        assert pool.holders(a) == ["ns/b"]  # still held by b
        assert pool.assign("ns/c", Request()) != a


def test_requested_shared_ip() -> None:
    pool = IpPool.from_text("10.0.0.1-10.0.0.4")
    pool.assign("ns/a", Request(requested_ip="10.0.0.3", sharing_key="k", ports=TCP80))
    assert pool.assign("ns/b", Request(requested_ip="10.0.0.3", sharing_key="k", ports=TCP443)) == "10.0.0.3"
    with pytest.raises(RequestedIPUnavailable):
        pool.assign("ns/c", Request(requested_ip="10.0.0.3", sharing_key="k", ports=TCP80))


def test_restore_before_allocating_keeps_every_ip_and_pool_edits_move_nothing() -> None:
    old = IpPool.from_text("10.0.0.0/28")
    held = {f"ns/s{i}": old.assign(f"ns/s{i}", Request()) for i in range(10)}
    old.release("ns/s3")
    del held["ns/s3"]
    # restart with a pool that no longer contains the first half of the addresses
    new = IpPool.from_text("10.0.0.6-10.0.0.20")
    for svc, ip in reversed(held.items()):
        assert new.restore(svc, ip, Request())
    for svc, ip in held.items():
        assert new.assign(svc, Request()) == ip  # nothing moved, even outside the new pool
    fresh = new.assign("ns/new", Request())
    assert fresh not in held.values() and new.contains(fresh)


def test_restore_refuses_a_conflicting_second_claim() -> None:
    pool = IpPool.from_text("10.0.0.0/28")
    assert pool.restore("ns/a", "10.0.0.2", Request(ports=TCP80))
    assert not pool.restore("ns/b", "10.0.0.2", Request(ports=TCP443))
    assert pool.lookup("ns/b") == ""
