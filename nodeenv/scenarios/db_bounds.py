"""Bounded OVN databases (a cluster: its central's exporters): every central member exports its NB
and SB file sizes and the free space on their filesystem (what an operator alerts on before a full
disk, docs/database-bounds.md), and a compaction of every member (what ovsdb-server does by itself
past its thresholds) shrinks each file."""

from __future__ import annotations

from nodeenv.daemons import http_get_in
from nodeenv.metrics_scrape import samples
from nodeenv.scenario import Scenario

KIB = 1024


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None:
        return
    central = cluster.central
    with scn.step("db bounds: every central member exports its NB/SB file size and free disk") as r:
        figures = []
        for url in central.endpoints["OVN_CENTRAL_METRICS"].split(","):
            got = samples(http_get_in(central.settings.netns, url, 5)[1])
            size = {lb["database"]: v for lb, v in got.get("ovn_db_file_bytes", [])}
            free = [v for _, v in got.get("ovn_db_filesystem_free_bytes", [])]
            if set(size) != {"OVN_Northbound", "OVN_Southbound"} or not free:
                raise RuntimeError(f"{url}: no file sizes or free space exported: {size} {free}")
            figures.append(
                f"NB {size['OVN_Northbound'] / KIB:.0f} KiB, SB {size['OVN_Southbound'] / KIB:.0f} KiB"
            )
        r.detail = f"{figures[0]}, {min(free) / KIB / KIB:.0f} MiB free ({len(figures)} members)"
    with scn.step("db bounds: ovsdb-server/compact shrinks every NB/SB file") as r:
        compacted = cluster.central_component.compact(central)
        grown = {f: ba for f, ba in compacted.items() if ba[1] > ba[0]}
        if grown or all(after == before for before, after in compacted.values()):
            raise RuntimeError(f"compaction shrank nothing or grew files: {compacted}")
        r.detail = ", ".join(
            f"{f} {b / KIB:.0f}>{a / KIB:.0f} KiB" for f, (b, a) in sorted(compacted.items())[:2]
        )
