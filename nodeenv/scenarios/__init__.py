"""Sandbox scenario parts, run in this order by `make sandbox`. Each module has run(Scenario)."""

from nodeenv.scenarios import cni, csi, fiberlb, flashdns, kubeapi, ovn_alive, tenancy, webhook

SCENARIOS = (ovn_alive, kubeapi, webhook, cni, csi, flashdns, fiberlb, tenancy)
