"""IPAM through the PrismNET gRPC API (a faithful in-process server), end to end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from nodeenv.plasmacloud_auth import DevPki
from protos import prismnet_pb2_grpc
from tests.integration.cni.conftest import Agent, Pods, ping, pod_ip
from tests.integration.cni.prismnet_server import FakePrismnet, serve


@pytest.fixture
def prismnet(short_tmp: Path, plasmacloud_pki: DevPki) -> Iterator[tuple[str, FakePrismnet]]:
    path = short_tmp / f"prismnet-{os.getpid()}.sock"
    server, fake = serve(str(path), plasmacloud_pki)
    yield f"unix:{path}", fake
    server.stop(grace=None)
    path.unlink(missing_ok=True)


def test_grpc_ipam_add_ping_del_and_gc(agent: Agent, pods: Pods, prismnet: tuple[str, FakePrismnet]) -> None:
    endpoint, fake = prismnet
    conflist = {**agent.conflist, "plugins": [{**agent.conflist["plugins"][0], "prismnetEndpoint": endpoint}]}
    rt = agent.runtime(conflist)
    made = []
    for i in range(3):
        name, path = pods.netns()
        cid = f"grpc{os.getpid()}x{i}" + "0" * 16
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE=grpcns;K8S_POD_NAME=g{i}"
        call = rt.add(cid, path, args=args)
        assert call.rc == 0, call.out
        pods.created[-1] = (name, cid, args, call.out)
        made.append((name, cid, args, call.out))
    assert fake.allocated() == {cid: out["ips"][0]["address"] for _, cid, _, out in made}
    assert made[0][3]["dns"] == {"nameservers": ["10.96.0.10"]}
    assert made[0][3]["interfaces"][1]["mac"] == "0a:58:" + ":".join(
        f"{int(x):02x}" for x in pod_ip(made[0][3]).split(".")
    )
    ping(made[0][0], pod_ip(made[1][3]))
    name, cid, args, out = made[0]
    assert rt.delete(cid, f"/run/netns/{name}", out, args=args).rc == 0
    assert cid not in fake.allocated()
    # GC with only the second pod valid releases the third one's address
    conf = {
        **conflist["plugins"][0],
        "name": "prismnet",
        "cniVersion": "1.1.0",
        "cni.dev/valid-attachments": [{"containerID": made[1][1], "ifname": "eth0"}],
    }
    assert rt.exec("prismnet", {"CNI_COMMAND": "GC"}, conf).rc == 0
    assert set(fake.allocated()) == {made[1][1]}
    assert f"g2-{made[2][1]}" not in agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port")


def test_grpc_ipam_unreachable_is_try_again(agent: Agent, pods: Pods, short_tmp: Path) -> None:
    conflist = {
        **agent.conflist,
        "plugins": [{**agent.conflist["plugins"][0], "prismnetEndpoint": f"unix:{short_tmp}/nobody.sock"}],
    }
    _, path = pods.netns()
    call = agent.runtime(conflist).add("grpcdown" + "0" * 16, path, args="K8S_POD_NAMESPACE=x;K8S_POD_NAME=y")
    assert call.rc == 1 and call.out["code"] == 11, call.out
    status = agent.runtime(conflist).exec(
        "prismnet",
        {"CNI_COMMAND": "STATUS"},
        {**conflist["plugins"][0], "name": "prismnet", "cniVersion": "1.1.0"},
    )
    assert status.rc == 1 and status.out["code"] == 50 and "unreachable" in status.out["details"]


def test_grpc_ipam_over_plaintext_is_refused(agent: Agent, pods: Pods, short_tmp: Path) -> None:
    """A PrismNET that speaks plaintext (or anything the pinned CA did not sign) gets no call: the
    agent's TLS handshake fails and the ADD is TryAgainLater, nothing allocated."""
    path = short_tmp / f"prismnet-plain-{os.getpid()}.sock"
    fake = FakePrismnet()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prismnet_pb2_grpc.add_NetworkServiceServicer_to_server(fake, server)
    server.add_insecure_port(f"unix:{path}")
    server.start()
    try:
        plugin = {**agent.conflist["plugins"][0], "prismnetEndpoint": f"unix:{path}"}  # type: ignore[index]
        _, netns = pods.netns()
        call = agent.runtime({**agent.conflist, "plugins": [plugin]}).add(
            "grpcplain" + "0" * 16, netns, args="K8S_POD_NAMESPACE=x;K8S_POD_NAME=y"
        )
        assert call.rc == 1 and call.out["code"] == 11, call.out
        assert fake.allocated() == {}
    finally:
        server.stop(grace=None)
        path.unlink(missing_ok=True)
