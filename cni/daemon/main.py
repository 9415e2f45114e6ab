"""`prismnet-agent`: the PrismNET CNI node agent.

Builds one OVSDB connection per database, the adapters and the service, makes sure the
node's management port exists, serves the `prismnet` executable on a unix socket and
Prometheus metrics + health on HTTP. SIGTERM/SIGINT: stop accepting, finish in-flight
requests, exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from cni.daemon.metrics import Metrics
from cni.daemon.server import CniServer, serve_unix
from cni.daemon.service import Adapters, PodNetworkService
from cni.ipam import AddressSource, OvnIpam
from cni.links import Links
from cni.management import ensure_management_port
from cni.ovn import OvsPorts, connect
from cni.ovn_nb import Northbound
from cni.settings import AgentSettings
from cni.wire import Dns
from common.jsonlog import setup_logging
from ovnaccess.connection import Ovsdb, c_json_parser

log = logging.getLogger("cni.daemon")
DRAIN_SECONDS = 60.0


def build_service(s: AgentSettings, ovs_db: Ovsdb, nb_db: Ovsdb) -> PodNetworkService:
    ovs = OvsPorts(ovs_db, s.bridge)
    node = s.node_name or ovs.system_id() or os.uname().nodename
    nb = Northbound(nb_db, owner=f"prismnet-agent/{node}")
    dns = Dns(
        nameservers=tuple(x for x in s.dns_servers.split(",") if x),
        search=tuple(x for x in s.dns_search.split(",") if x),
    )
    adapters = Adapters(
        links=Links(tx_checksum_off=ovs.userspace_datapath()),
        ovs=ovs,
        nb=nb,
        ovs_db=ovs_db,
        nb_db=nb_db,
        ovn_ipam=OvnIpam(nb, s.cluster_network, s.subnet_prefix, dns, nb_db.connected, s.cluster_domain),
        prismnet_ipam=_prismnet_factory(),
    )
    return PodNetworkService(s, adapters, node)


def _prismnet_factory() -> Callable[[str], AddressSource] | None:
    try:
        from cni.ipam_prismnet import PrismnetIpam
    except ImportError:  # stubs not generated: the agent still serves OVN and delegated IPAM
        log.warning("PrismNET gRPC stubs unavailable; prismnetEndpoint configs will be refused")
        return None
    clients: dict[str, PrismnetIpam] = {}

    def factory(endpoint: str) -> PrismnetIpam:
        if endpoint not in clients:
            clients[endpoint] = PrismnetIpam(endpoint)
        return clients[endpoint]

    return factory


async def run(s: AgentSettings) -> int:
    # CNI requests run in threads (asyncio.to_thread); the default pool is cpu+4 threads
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(64, thread_name_prefix="cni-req"))
    if not c_json_parser():
        log.warning(
            "python-ovs has no C JSON parser (ovs._json): OVSDB traffic is parsed in pure Python, "
            "costing CPU on every commit and update; install python3-openvswitch or build ovs with it"
        )
    ovs_db = await asyncio.to_thread(connect, s.ovs_db, "Open_vSwitch")
    nb_db = await asyncio.to_thread(connect, s.ovn_nb_db, "OVN_Northbound")
    service = await asyncio.to_thread(build_service, s, ovs_db, nb_db)
    a = service._a
    if s.management_port:
        await asyncio.to_thread(ensure_management_port, s, a.nb, a.ovs, a.links, service.node)
    metrics = Metrics(ips_in_use=a.nb.ips_by_namespace)
    server = CniServer(service, metrics)
    runner = await serve_unix(server.app(), s.socket)
    metrics_runner = await _serve_metrics(s, metrics, lambda: ovs_db.connected() and nb_db.connected())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("prismnet-agent serving on %s (node %s, bridge %s)", s.socket, service.node, s.bridge)
    await stop.wait()
    log.info("shutting down: %d request(s) in flight", server.in_flight)
    for site in list(runner.sites):
        await site.stop()  # no new connections; accepted ones continue
    try:
        await asyncio.wait_for(server.idle.wait(), DRAIN_SECONDS)
    except TimeoutError:
        log.warning("in-flight requests did not finish within %.0fs", DRAIN_SECONDS)
    await runner.cleanup()
    if metrics_runner:
        await metrics_runner.cleanup()
    s.socket.unlink(missing_ok=True)
    await asyncio.to_thread(ovs_db.stop)
    await asyncio.to_thread(nb_db.stop)
    log.info("prismnet-agent stopped")
    return 0


async def _serve_metrics(
    s: AgentSettings, metrics: Metrics, ready: Callable[[], bool]
) -> web.AppRunner | None:
    if not s.metrics_address:
        return None
    host, _, port = s.metrics_address.rpartition(":")
    runner = web.AppRunner(metrics.app(ready), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    return runner


def main(argv: Sequence[str] | None = None) -> int:
    s = AgentSettings.from_argv(sys.argv[1:] if argv is None else argv, os.environ)
    setup_logging(s.log_level)
    try:
        return asyncio.run(run(s))
    except Exception:
        log.exception("prismnet-agent failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
