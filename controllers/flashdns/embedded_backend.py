"""The embedded backend: records go into the in-memory Zone that our own DNS server answers from."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from controllers.flashdns.forwarder import Forwarder, Upstream, upstreams_from_resolv_conf
from controllers.flashdns.ratelimit import ResponseRateLimit
from controllers.flashdns.records import RecordSet
from controllers.flashdns.server import DnsServer, split_host_port
from controllers.flashdns.settings import FlashDnsSettings
from controllers.flashdns.zone import ZONE_OWNER, Zone, apex_records

log = logging.getLogger(__name__)


def upstreams(s: FlashDnsSettings) -> tuple[Upstream, ...]:
    if s.upstreams.strip().lower() == "none":
        return ()
    if s.upstreams.strip():
        return tuple(Upstream.parse(u) for u in s.upstreams.split(",") if u.strip())
    ours = [Upstream(s.cluster_dns_ip)] if s.cluster_dns_ip else []
    host, port = split_host_port(s.dns_address)
    if host not in ("0.0.0.0", "::") and port == 53:
        ours.append(Upstream(host))
    return upstreams_from_resolv_conf(s.resolv_conf_path, exclude=ours)


class EmbeddedBackend:
    name = "embedded"
    serves_dns = True

    def __init__(self, s: FlashDnsSettings) -> None:
        self.settings = s
        self.zone = Zone(s.cluster_domain, ttl=s.dns_ttl, negative_ttl=s.negative_ttl)
        self.zone.replace(ZONE_OWNER, apex_records(self.zone, s.cluster_dns_ip))
        ups = upstreams(s)
        rrl = ResponseRateLimit(rate=s.rrl_responses_per_second, slip=s.rrl_slip,
                                ipv4_prefix=s.rrl_ipv4_prefix, ipv6_prefix=s.rrl_ipv6_prefix)  # fmt: skip
        forwarder = Forwarder(ups, timeout=s.forward_timeout) if ups else None
        self.server = DnsServer(self.zone, forwarder, rrl=rrl)
        log.info("upstream resolvers: %s", ", ".join(f"{u.host}:{u.port}" for u in ups) or "none")

    def bind(self) -> None:
        """Take the address now (a clear error at start-up when it is taken); serve later."""
        self.server.bind(self.settings.dns_address)

    async def start(self) -> None:
        """Serve (call once the caches are synced and reconciled: never answer from an empty zone)."""
        port = await self.server.start(self.settings.dns_address)
        if self.settings.dns_port_file:
            path = Path(self.settings.dns_port_file)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps({"dns": port}))
            tmp.replace(path)

    async def stop(self) -> None:
        await self.server.stop()

    async def replace(self, owner: str, records: RecordSet) -> None:
        self.zone.replace(owner, records)

    async def resync(self, desired: dict[str, RecordSet]) -> int:
        """The zone cannot drift from what we wrote; owners gone from the caches are dropped."""
        stale = self.zone.owners() - desired.keys() - {ZONE_OWNER}
        for owner in stale:
            self.zone.remove(owner)
        return len(stale)
