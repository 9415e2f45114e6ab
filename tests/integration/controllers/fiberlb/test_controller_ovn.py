"""fiberlb-controller with its default `ovn` backend against the API double and the real OVN NB:
shared IPs, ClusterIP Services, cleanup (traffic through these rows: test_ovn_traffic.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.fiberlb.ovn_backend import OvnBackend
from nodeenv.node import Node
from tests.integration.controllers.fiberlb.controller_harness import (
    Admin,
    RunningController,
    endpoint_slice,
    ingress,
    service,
    until,
)

pytestmark = [pytest.mark.root, pytest.mark.ovn]
P = "fiberlb.plasmacloud.io/"


async def rows(nb: OvnBackend, key: str, check: Any) -> Any:
    async def read() -> Any:
        return nb.rows(key)

    return await until(read, check)


async def test_shared_ip_cluster_ips_and_cleanup(
    kube_api: Any, admin: Admin, ovn_node: Node, nb: OvnBackend
) -> None:
    flags = ["--leader-elect=false", "--ovn-nb-db", ovn_node.endpoints["OVN_NB_DB"],
             "--external-ip-pool", "192.168.241.0/29", "--debounce", "0.05"]  # fmt: skip
    ctrl = await RunningController(kube_api, flags).start()
    try:
        share = {P + "allow-shared-ip": "team-a"}
        dns = [{"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}]
        await admin.create(endpoint_slice("web", ["10.244.9.2"]))
        await admin.create(service("web", annotations=share))
        await admin.create(service("web-dns", annotations=share, ports=dns))
        await admin.create(service("web-clash", annotations=share))  # port 80 again: its own IP
        svcs = {n: await until(lambda n=n: admin.get(n), lambda s: bool(ingress(s))) for n in
                ("web", "web-dns", "web-clash")}  # fmt: skip
        ip = ingress(svcs["web"])[0]
        assert ingress(svcs["web-dns"]) == [ip] and ingress(svcs["web-clash"]) != [ip]
        cluster_ip = svcs["web"]["spec"]["clusterIP"]
        got = await rows(nb, "default/web", lambda r: r.get("tcp", {}).get("vips", {}).get(f"{ip}:80"))
        assert got["tcp"]["vips"] == {f"{ip}:80": "10.244.9.2:8080", f"{cluster_ip}:80": "10.244.9.2:8080"}
        assert (await rows(nb, "default/web-dns", bool))["udp"]["vips"][
            f"{ip}:53"
        ] == ""  # reject: no endpoints

        # a plain ClusterIP Service is programmed too, and follows its endpoints
        plain = service("plain", lb_class=None, type="ClusterIP")
        await admin.create(plain)
        await admin.create(endpoint_slice("plain", ["10.244.9.3", "10.244.9.4"]))
        plain_ip = (await admin.get("plain"))["spec"]["clusterIP"]
        want = "10.244.9.3:8080,10.244.9.4:8080"
        got = await rows(
            nb, "default/plain", lambda r: r.get("tcp", {}).get("vips", {}).get(f"{plain_ip}:80") == want
        )
        assert got["tcp"]["vips"] == {f"{plain_ip}:80": want}
        assert not ingress(await admin.get("plain"))

        for name in ("web", "plain"):
            await admin.delete(name)
        assert await rows(nb, "default/web", lambda r: r == {}) == {}
        assert await rows(nb, "default/plain", lambda r: r == {}) == {}
        assert await until(lambda: admin.gone("web"), bool)
        assert ingress(await admin.get("web-dns")) == [ip]  # still held by the other sharer
    finally:
        assert await ctrl.stop() == 0
