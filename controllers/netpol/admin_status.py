"""The `Ready` condition of each AdminNetworkPolicy / BaselineAdminNetworkPolicy, written to its
status subresource when what it says changes (the API defines `status.conditions` as
metav1.Conditions without naming types; `Ready` with reasons SetupSucceeded / SetupFailed is the one
ovn-kubernetes' per-zone condition also uses).

A merge patch of the whole list keeps any other writer's conditions; lastTransitionTime moves only
when `status` flips; observedGeneration is the generation the outcome was computed from.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controllers.machinery import ApiException, Kind, KubeClient
from controllers.netpol.admin_translate import Outcome

log = logging.getLogger(__name__)
READY = "Ready"


def condition(obj: Mapping[str, Any], outcome: Outcome, now: datetime) -> dict[str, Any]:
    status = "True" if outcome.ready else "False"
    old = next((c for c in _conditions(obj) if c.get("type") == READY), None)
    since = old["lastTransitionTime"] if old and old.get("status") == status and old.get(
        "lastTransitionTime") else now.strftime("%Y-%m-%dT%H:%M:%SZ")  # fmt: skip
    generation = obj["metadata"].get("generation", 0)
    return {"type": READY, "status": status, "reason": outcome.reason, "message": outcome.message,
            "observedGeneration": generation, "lastTransitionTime": since}  # fmt: skip


def _conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def _same(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    keys = ("status", "reason", "message", "observedGeneration")
    return a is not None and all(a.get(k) == b.get(k) for k in keys)


class AdminStatus:
    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def publish(self, kind: Kind, obj: Mapping[str, Any], outcome: Outcome) -> bool:
        """Write the Ready condition if it differs from the object's; True if written."""
        want = condition(obj, outcome, datetime.now(UTC))
        have = _conditions(obj)
        if _same(next((c for c in have if c.get("type") == READY), None), want):
            return False
        conditions = [c for c in have if c.get("type") != READY] + [want]
        try:
            body = {"status": {"conditions": conditions}}
            await self.client.patch(kind, None, obj["metadata"]["name"], body, subresource="status")
        except ApiException as e:
            if e.status != 404:  # deleted meanwhile: nothing to report on
                raise
            return False
        log.info("%s %s: Ready=%s (%s)", kind.kind, obj["metadata"]["name"], want["status"], outcome.message)
        return True
