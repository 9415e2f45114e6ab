"""Which Kubernetes namespace a pod address on this node belongs to, from the node's logical ports
(their `prismnet.namespace` external_id), for verdicts of cluster-scoped policies (ANP/BANP), whose
ACL name carries no namespace. An ACL verdict is logged on the judged pod's node (ingress: the
destination's, egress: the source's), so the node's own ports suffice. Read again on a miss, at
most every REFRESH seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from cni.ovn import K_NS, Lsp
from cni.ovn_egress import ipv4_of

REFRESH = 2.0


class PortNamespaces:
    def __init__(
        self, ports: Callable[[], Iterable[Lsp]], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ports, self._clock = ports, clock
        self._by_ip: dict[str, str] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def __call__(self, ip: str) -> str:
        with self._lock:
            if ip not in self._by_ip and self._clock() - self._read_at >= REFRESH:
                self._read_at = self._clock()
                try:
                    ports = list(self._ports())
                except Exception:  # the NB away: no namespace for now
                    return ""
                self._by_ip = {a: p.external_ids[K_NS] for p in ports if p.external_ids.get(K_NS)
                               for a in ipv4_of(list(p.addresses))}  # fmt: skip
            return self._by_ip.get(ip, "")
