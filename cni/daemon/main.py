"""`prismnet-agent`: the PrismNET CNI node agent.

Serves Prometheus metrics + health on HTTP first, then builds one OVSDB connection per
database, the adapters and the service, makes sure the node's management port exists, and serves
the `prismnet` executable on a unix socket. SIGTERM/SIGINT: stop accepting, finish in-flight
requests, exit 0.

Started before the node's OVS is up (a DaemonSet starts with its siblings: ovs-node's ovsdb-server
and ovn-controller, which creates the integration bridge), it waits instead of exiting: /healthz
answers, /readyz is 503 with what it waits for, and the log names it (again whenever the reason
changes), each step retried every RETRY_SECONDS until it succeeds or SIGTERM comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from cni.address_watch import address_changes
from cni.daemon.lost_rows import LostRows
from cni.daemon.metrics import AgentSources, Metrics
from cni.daemon.server import CniServer, serve_unix
from cni.daemon.service import Adapters, PodNetworkService
from cni.ipam import AddressSource, OvnIpam
from cni.ipam_usage import SubnetUsage
from cni.links import Links
from cni.management import ensure_management_port, management_names
from cni.ovn import K_LSP, OvsPorts, connect
from cni.ovn_controller_probe import OvnControllerProbe
from cni.ovn_nb import Northbound, SubnetOverlap
from cni.platform_guard import GUARD_REFRESH, GUARD_TABLES, ensure_platform_guard, guard_row_hook
from cni.port_namespaces import PortNamespaces
from cni.republish import Republished, republish
from cni.settings import AgentSettings
from cni.verdict_events import DropEvents
from cni.verdicts import VerdictCounters, follow
from cni.wire import Dns
from common.jsonlog import setup_logging
from common.malloc import pin_mmap_threshold
from common.plasmacloud_grpc import PlasmaCloudAuth
from ovnaccess import tls
from ovnaccess.connection import Ovsdb, c_json_parser

log = logging.getLogger("cni.daemon")
DRAIN_SECONDS = 60.0
RETRY_SECONDS = 2.0
T = TypeVar("T")


class Startup:
    """What the agent waits for before it serves, for /readyz and the log."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop, self.waiting_for = stop, "its first connection to the local OVS"

    async def until(self, what: str, step: Callable[[], T]) -> T | None:
        """step() in a thread until it returns (None once SIGTERM came), each failure shown as
        "waiting for <what>: <error>"."""
        last = ""
        while not self.stop.is_set():
            try:
                result = await asyncio.to_thread(step)
            except Exception as e:  # anything before serving is retried: kubelet would only restart us
                reason = f"{what}: {e}"
                if reason != last:
                    log.warning("waiting for %s", reason)
                last, self.waiting_for = reason, reason
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), RETRY_SECONDS)
                continue
            if last:
                log.info("%s: ready", what)
            return result
        return None


class BridgeMissing(RuntimeError):
    pass


def _bridge(ovs_db: Ovsdb, bridge: str) -> bool:
    if not OvsPorts(ovs_db, bridge).bridge_exists():
        raise BridgeMissing(f"no bridge {bridge} in the local OVS yet (ovn-controller creates it)")
    return True


def build_service(
    s: AgentSettings, ovs_db: Ovsdb, nb_db: Ovsdb, on_overlap: Callable[[SubnetOverlap], None] | None = None
) -> PodNetworkService:
    ovs = OvsPorts(ovs_db, s.bridge)
    node = s.node_name or ovs.system_id() or os.uname().nodename
    nb = Northbound(nb_db, owner=f"prismnet-agent/{node}", on_overlap=on_overlap)
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
        prismnet_ipam=_prismnet_factory(s.plasmacloud),
    )
    return PodNetworkService(s, adapters, node)


def _prismnet_factory(auth: PlasmaCloudAuth | None) -> Callable[[str], AddressSource] | None:
    if auth is None:  # PrismNET is only called over TLS with an IAM token
        log.info("no --plasmacloud-ca/--plasmacloud-token-file: prismnetEndpoint configs will be refused")
        return None
    try:
        from cni.ipam_prismnet import PrismnetIpam
    except ImportError:  # stubs not generated: the agent still serves OVN and delegated IPAM
        log.warning("PrismNET gRPC stubs unavailable; prismnetEndpoint configs will be refused")
        return None
    clients: dict[str, PrismnetIpam] = {}

    def factory(endpoint: str) -> PrismnetIpam:
        if endpoint not in clients:
            clients[endpoint] = PrismnetIpam(endpoint, auth)
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
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    startup = Startup(stop)
    started: list[PodNetworkService] = []
    dbs: list[Ovsdb] = []
    metrics = Metrics(AgentSources(lambda: _Figures(started[0]) if started else None, s.cluster_network,
                                   s.subnet_prefix))  # fmt: skip
    if s.ovn_rundir:
        metrics.registry.register(OvnControllerProbe(Path(s.ovn_rundir)))
    serving = asyncio.Event()
    metrics_runner = await _serve_metrics(
        s, metrics, lambda: serving.is_set() and all(d.connected() for d in dbs), lambda: startup.waiting_for
    )
    verdicts = None
    if s.acl_log_file:  # independent of OVS being up: lines are read as ovn-controller writes them
        counters = VerdictCounters(metrics.registry, s.verdict_series)
        events = await _drop_events(s)
        own_ports = PortNamespaces(lambda: started[0]._a.nb.owned_ports(started[0].node) if started else [])
        verdicts = asyncio.create_task(follow(Path(s.acl_log_file), counters, stop, own_ports, events=events))
    try:
        refresh: list[Callable[[], object]] = []
        service = await _start(s, startup, dbs, refresh, metrics)
        if service is None:
            log.info("stopped before the node's OVS/OVN was ready")
            return 0
        started.append(service)
        server = CniServer(service, metrics)
        runner = await serve_unix(server.app(), s.socket)
        serving.set()
        guard_changed = asyncio.Event()  # the node's addresses or its guard's rows changed
        wake = functools.partial(loop.call_soon_threadsafe, guard_changed.set)
        for table in GUARD_TABLES:
            dbs[1].on_row_change(table, guard_row_hook(service.node, wake))
        keep = [asyncio.create_task(_keep_guard(stop, step, guard_changed)) for step in refresh]
        replaced = asyncio.Event()
        dbs[1].on_replaced(lambda: loop.call_soon_threadsafe(replaced.set))  # dbs: [OVS, NB]
        lost = LostRows(service.node, loop)
        dbs[1].on_row_change("Logical_Switch_Port", lost.on_port)
        keep.append(asyncio.create_task(_rebuild_when_replaced(stop, replaced, lost, s, service, refresh)))
        startup.waiting_for = ""
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
        await asyncio.gather(*keep)
        s.socket.unlink(missing_ok=True)
    finally:
        stop.set()
        if verdicts is not None:
            await verdicts
        if metrics_runner:
            await metrics_runner.cleanup()
        metrics.close()
        for db in dbs:
            await asyncio.to_thread(db.stop)
    log.info("prismnet-agent stopped")
    return 0


async def _start(
    s: AgentSettings,
    startup: Startup,
    dbs: list[Ovsdb],
    refresh: list[Callable[[], object]],
    metrics: Metrics,
) -> PodNetworkService | None:
    """The connections (added to `dbs` as made), the integration bridge, the service, the
    management port and the platform guard (its step added to `refresh`), each waited for; None
    when SIGTERM came first."""
    ovs_db = await startup.until(
        f"the local OVS (Open_vSwitch at {s.ovs_db})", lambda: connect(s.ovs_db, "Open_vSwitch")
    )
    if ovs_db is None:
        return None
    dbs.append(ovs_db)
    metrics.ovsdb.watch(ovs_db, "Open_vSwitch")
    nb_db = await startup.until(
        f"OVN Northbound at {s.ovn_nb_db}", lambda: connect(s.ovn_nb_db, "OVN_Northbound")
    )
    if nb_db is None:
        return None
    dbs.append(nb_db)
    metrics.ovsdb.watch(nb_db, "OVN_Northbound")
    if await startup.until(f"the integration bridge {s.bridge}", lambda: _bridge(ovs_db, s.bridge)) is None:
        return None
    service = await asyncio.to_thread(build_service, s, ovs_db, nb_db, metrics.refused_overlap)
    if s.management_port:
        a = service._a
        port = await startup.until(
            f"the management port {s.management_if}",
            lambda: ensure_management_port(s, a.nb, a.ovs, a.links, service.node),
        )
        if port is None:
            return None
        guard = functools.partial(ensure_platform_guard, s, a.nb.guard(), a.links, service.node, port.address)
        if await startup.until("the platform guard", guard) is None:
            return None
        refresh.append(guard)
    return service


class _Figures:
    """What /metrics reads from a started agent: IPAM use (NB) and this node's tunnels (OVS)."""

    def __init__(self, service: PodNetworkService) -> None:
        self._a = service._a

    def address_usage(self) -> list[SubnetUsage]:
        return self._a.nb.address_usage()

    def tunnels(self) -> dict[str, int]:
        return self._a.ovs.tunnels()


async def _keep_guard(stop: asyncio.Event, guard: Callable[[], object], changed: asyncio.Event) -> None:
    """The platform guard again as soon as `changed` is set (its rows in the NB changed by someone)
    or the node's namespace gains or loses an IPv4 address (the node-local DNS's, an operator's),
    and every GUARD_REFRESH s besides; a failure is logged and tried at the next round."""
    watch = asyncio.create_task(address_changes(changed))
    try:
        while not stop.is_set():
            await _first_of([stop, changed], GUARD_REFRESH)
            if stop.is_set():
                break
            changed.clear()  # a change during the run below: once more after it
            try:
                await asyncio.to_thread(guard)
            except Exception as e:  # the NB away for a while: the guard in OVN stays as it was
                log.warning("platform guard refresh failed: %s", e)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)


async def _first_of(events: list[asyncio.Event], timeout: float | None = None) -> None:
    """Return once one of `events` is set, or after `timeout` seconds (None: no limit)."""
    waits = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def _rebuild_when_replaced(
    stop: asyncio.Event,
    replaced: asyncio.Event,
    lost: LostRows,
    s: AgentSettings,
    service: PodNetworkService,
    refresh: list[Callable[[], object]],
) -> None:
    """Each time the NB is found replaced by an empty one, or rows of this node are deleted under it
    (cni/daemon/lost_rows.py): this node's part written again (cni/republish.py), retried every
    RETRY_SECONDS until it succeeds."""
    while not stop.is_set():
        await _first_of([replaced, lost.wake, stop])
        full = replaced.is_set()
        replaced.clear()
        names, since = lost.take()
        if not full and not names:
            continue
        while not stop.is_set() and not replaced.is_set():
            try:
                done = await asyncio.to_thread(_rebuild_node, s, service, refresh, None if full else names)
            except Exception as e:  # the new NB not writable yet (an election): again shortly
                log.warning("writing this node's NB state again failed: %s", e)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RETRY_SECONDS)
                continue
            if full:
                log.warning("the NB was replaced: %d pod port(s) of node %s written again (held until "
                            "their policies are in), %d gone, in %.2f s", done.ports, service.node,
                            done.skipped, done.seconds)  # fmt: skip
            elif done.ports or done.management:
                log.warning("rows of node %s deleted from the NB under its agent written back: the "
                            "management port: %s, %d pod port(s) (held until their policies are in), "
                            "%.2f s after the deletion", service.node, done.management, done.ports,
                            time.monotonic() - since, extra={"node": service.node})  # fmt: skip
            break


@dataclass(frozen=True, slots=True)
class _Rebuilt:
    ports: int
    skipped: int
    seconds: float
    management: bool
    """The management port (and the guard, egress set, default route with it) written again."""


def _rebuild_node(
    s: AgentSettings, service: PodNetworkService, refresh: list[Callable[[], object]], lost: set[str] | None
) -> _Rebuilt:
    """Pods first (held: nothing reaches them yet), then the management port, guard and egress set.
    `lost`: only these ports, each if still missing from the NB (a pod's: if its OVS interface is
    still bound; the management port's: with all that is the node's); None: everything (a new NB)."""
    a = service._a
    ports = a.ovs.owned_ports()
    if lost is not None:
        ports = [
            p for p in ports if p.external_ids.get(K_LSP) in lost and a.nb.port(p.external_ids[K_LSP]) is None
        ]
    done = republish(s, a.nb, ports, a.links.pod_link) if ports or lost is None else Republished(0, 0, 0.0)
    mgmt_lsp = management_names(service.node)[1]
    management = s.management_port and (lost is None or (mgmt_lsp in lost and a.nb.port(mgmt_lsp) is None))
    if management:
        ensure_management_port(s, a.nb, a.ovs, a.links, service.node)
    if management or lost is None:
        for step in refresh:
            step()
    if management or done.ports or lost is None:
        service.resync_egress()
    return _Rebuilt(done.ports, done.skipped, done.seconds, management)


async def _drop_events(s: AgentSettings) -> DropEvents | None:
    if not s.events_kubeconfig:
        return None
    try:
        return await DropEvents.connect(s.events_kubeconfig, s.node_name or os.uname().nodename)
    except Exception as e:  # verdict logs and counters go on without Events
        log.warning("no PolicyDenied Events: %s", e)
        return None


async def _serve_metrics(
    s: AgentSettings, metrics: Metrics, ready: Callable[[], bool], why: Callable[[], str]
) -> web.AppRunner | None:
    if not s.metrics_address:
        return None
    host, _, port = s.metrics_address.rpartition(":")
    runner = web.AppRunner(metrics.app(ready, why), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    return runner


def main(argv: Sequence[str] | None = None) -> int:
    s = AgentSettings.from_argv(sys.argv[1:] if argv is None else argv, os.environ)
    setup_logging(s.log_level)
    pin_mmap_threshold()
    try:
        tls.use(s.ovn_tls)  # the key's mode checked before anything connects
    except (ValueError, OSError) as e:
        log.error("prismnet-agent: %s", e)
        return 2
    try:
        return asyncio.run(run(s))
    except Exception:
        log.exception("prismnet-agent failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
