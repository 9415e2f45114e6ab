"""Sandbox scenario parts, run in this order by `make sandbox`. Each module has run(Scenario)."""

from nodeenv.scenarios import cni, csi, flashdns, ovn_alive, webhook

SCENARIOS = (ovn_alive, webhook, cni, csi, flashdns)
