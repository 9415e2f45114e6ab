"""The metrics operators need (issue 32 item 2): every daemon's /metrics, scraped in the namespace it
listens in, has the names common/metric_catalogue.py lists for it and passes `promtool check metrics`;
each node counts a Geneve tunnel to each other node; a pod's ADD moves the CNI counter and its
subnet's used addresses; the central's exporters name the RAFT leaders and the active northd."""

from __future__ import annotations

from common.metric_catalogue import AGENT, CENTRAL
from nodeenv.metrics_scrape import Target, missing_names, promtool_problems, targets, value
from nodeenv.scenario import Scenario

NS, POD = "sbx-metrics", "sbx-metrics-a"


def run(scn: Scenario) -> None:
    places = [scn.at(i) for i in range(scn.spread)]
    found = list(targets([(p.name, p.netns, p.env) for p in places], scn.env))
    with scn.step("metrics: every daemon's catalogued names, promtool-clean", on=scn.where(*places)) as r:
        for t in found:
            text = t.scrape()
            if missing := missing_names(t, text):
                raise AssertionError(f"{t.component} on {t.where} lacks {sorted(missing)}")
            if problems := promtool_problems(text):
                raise AssertionError(f"{t.component} on {t.where}: promtool: {problems}")
        r.detail = f"{len(found)} daemons"
    agents = {t.where: t for t in found if t.component == AGENT}
    if len(places) > 1:
        with scn.step("metrics: Geneve tunnels per node = nodes - 1", on=scn.where(*places)) as r:
            counts = {where: value(t.scrape(), "prismnet_geneve_tunnels") for where, t in agents.items()}
            if set(counts.values()) != {float(len(places) - 1)}:
                raise AssertionError(f"prismnet_geneve_tunnels by node: {counts}")
            r.detail = f"{len(places) - 1} on each of {len(places)} nodes"
    first = places[0]
    with scn.step("metrics: a pod ADD moves the CNI counter and its subnet's use", on=first.name) as r:
        agent = agents[first.name]
        before = _add_figures(agent)
        scn.add_pod(first.env, NS, POD, POD)
        after = _add_figures(agent)
        if after[0] != before[0] + 1 or after[1] <= before[1]:
            raise AssertionError(f"ADDs ok, addresses used: before {before}, after {after}")
        r.detail = f"ADD ok {before[0]:.0f} -> {after[0]:.0f}, used {before[1]:.0f} -> {after[1]:.0f}"
    central = [t for t in found if t.component == CENTRAL]
    if central:
        with scn.step("metrics: ovn-central's leaders and active northd", on="central") as r:
            r.detail = _central_figures(central)


def _add_figures(agent: Target) -> tuple[float, float]:
    text = agent.scrape()
    adds = value(text, "prismnet_cni_requests_total", command="ADD", code="0") or 0.0
    return adds, value(text, "prismnet_ipam_addresses", state="used") or 0.0


def _central_figures(central: list[Target]) -> str:
    texts = {t.where: t.scrape() for t in central}
    out = []
    for db in ("OVN_Northbound", "OVN_Southbound"):
        leads = [w for w, text in texts.items() if value(text, "ovn_raft_role", database=db, role="leader")]
        out.append(f"{db} leader {', '.join(leads) or 'none (standalone)'}")
    active = [w for w, text in texts.items() if value(text, "ovn_northd_status", state="active")]
    if not all(value(text, "ovn_central_up", target="nb") == 1 for text in texts.values()):
        raise AssertionError("an NB member did not answer its exporter")
    return "; ".join([*out, f"northd active on {', '.join(active) or 'none'}"])
