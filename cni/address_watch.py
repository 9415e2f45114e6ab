"""Hears this network namespace gain or lose an IPv4 address (rtnetlink's IPv4 address group), so
the platform guard takes a new node address in as it appears: until then a tenant pod could reach
the node's listeners on it (the periodic refresh stays, for a change missed while this was down)."""

from __future__ import annotations

import asyncio
import logging

from pyroute2 import AsyncIPRoute  # type: ignore[import-untyped]
from pyroute2.netlink.exceptions import NetlinkError  # type: ignore[import-untyped]
from pyroute2.netlink.rtnl import RTMGRP_IPV4_IFADDR  # type: ignore[import-untyped]

log = logging.getLogger(__name__)
EVENTS = frozenset({"RTM_NEWADDR", "RTM_DELADDR"})


async def address_changes(changed: asyncio.Event) -> None:
    """Set `changed` at each IPv4 address added or removed here, until cancelled. A netlink failure
    is logged and ends the watch (the caller's periodic refresh still covers such changes)."""
    try:
        async with AsyncIPRoute() as ipr:
            await ipr.bind(groups=RTMGRP_IPV4_IFADDR)
            while True:
                async for msg in ipr.get():
                    if msg.get("event") in EVENTS:
                        changed.set()
    except (OSError, NetlinkError) as e:
        log.warning("not watching this namespace's addresses (%s): the guard follows them every refresh", e)
