"""Sandbox scenario parts, run in this order by `make sandbox`. Each module has run(Scenario)."""

from nodeenv.scenarios import (
    cni,
    csi,
    fiberlb,
    flashdns,
    kubeapi,
    ovn_alive,
    podman,
    spec_times,
    tenancy,
    webhook,
)

SCENARIOS = (ovn_alive, kubeapi, webhook, cni, podman, csi, flashdns, fiberlb, tenancy, spec_times)
