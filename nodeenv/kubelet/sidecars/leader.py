"""client-go's leader election on a coordination.k8s.io/v1 Lease, as the CSI sidecars run it
(csi-lib-utils/leaderelection): the Lease is taken when absent, or when its holder has not renewed
it for leaseDurationSeconds; the holder renews it every retry period; a holder that could not
renew within the renew deadline has lost it; on a clean stop it is released (holder cleared)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from nodeenv.kubelet.apiclient import ApiError, KubeClient

log = logging.getLogger(__name__)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


def micro_time(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: str) -> float:
    return datetime.strptime(value.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


class LeaderElector:
    def __init__(
        self,
        client: Callable[[], KubeClient],
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
    ) -> None:
        self._client, self.namespace, self.name, self.identity = client, namespace, name, identity
        self.duration, self.deadline = lease_duration, renew_deadline
        self.leading = False
        self._renewed = 0.0

    def _path(self, name: str = "") -> str:
        return LEASES.format(ns=self.namespace) + (f"/{name}" if name else "")

    def try_acquire_or_renew(self) -> bool:
        now = time.time()
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": micro_time(now),
        }
        try:
            try:
                lease = self._client().request("GET", self._path(self.name))
            except ApiError as e:
                if e.code != 404:
                    raise
                spec |= {"acquireTime": micro_time(now), "leaseTransitions": 0}
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": spec,
                }
                self._client().request("POST", self._path(), body)
                return self._won(now)
            old = lease.get("spec") or {}
            holder = old.get("holderIdentity") or ""
            if holder and holder != self.identity:
                renewed = parse_micro_time(old["renewTime"]) if old.get("renewTime") else 0.0
                if renewed + float(old.get("leaseDurationSeconds") or self.duration) > now:
                    self.leading = False
                    return False
            if holder != self.identity:
                spec |= {
                    "acquireTime": micro_time(now),
                    "leaseTransitions": int(old.get("leaseTransitions") or 0) + (1 if holder else 0),
                }
            lease["spec"] = {**old, **spec}
            self._client().request("PUT", self._path(self.name), lease)  # resourceVersion: optimistic
            return self._won(now)
        except (ApiError, OSError) as e:
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def _won(self, now: float) -> bool:
        if not self.leading:
            log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
        self.leading, self._renewed = True, now
        return True

    def lost(self) -> bool:
        """A leader that has not renewed within the renew deadline (client-go then exits)."""
        return self.leading and time.time() - self._renewed > self.deadline

    def release(self) -> None:
        if not self.leading:
            return
        try:
            lease = self._client().request("GET", self._path(self.name))
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"] |= {"holderIdentity": None, "leaseDurationSeconds": 1}
                self._client().request("PUT", self._path(self.name), lease)
        except (ApiError, OSError) as e:
            log.warning("lease %s/%s not released: %s", self.namespace, self.name, e)
        self.leading = False
