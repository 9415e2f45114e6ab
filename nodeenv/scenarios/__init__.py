"""Sandbox scenario parts, run in this order by `make sandbox`. Each module has run(Scenario)."""

from nodeenv.scenarios import cni, csi, ovn_alive, podman, webhook

SCENARIOS = (ovn_alive, webhook, cni, podman, csi)
