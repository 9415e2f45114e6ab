"""The sidecar stand-ins' leader election (nodeenv/kubelet/sidecars/leader.py) on the API double's
coordination.k8s.io Leases, as client-go's: the first replica takes the Lease, the second waits while
it is renewed, takes it over once it expires (leaseTransitions counted) or at once when released."""

from __future__ import annotations

import time

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.sidecars.leader import LeaderElector, micro_time
from tests.kubeapi_fixture import KubeApiHandle

NAME = "external-attacher-leader-stor-plasmacloud-io"


def test_one_replica_leads_until_it_expires_or_releases(kube_api: KubeApiHandle) -> None:
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    a, b = (
        LeaderElector(lambda: client, "kube-system", NAME, who, lease_duration=15)
        for who in ("ctrl-a", "ctrl-b")
    )
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew() and not b.leading
    lease = kube_api.get("leases", "kube-system", NAME)
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]) == ("ctrl-a", 15)
    assert lease["spec"]["leaseTransitions"] == 0

    # ctrl-a stops renewing: once renewTime + leaseDurationSeconds has passed, ctrl-b takes over
    stale = dict(lease, spec={**lease["spec"], "renewTime": micro_time(time.time() - 16)})
    client.request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{NAME}", stale)
    assert b.try_acquire_or_renew() and b.leading
    lease = kube_api.get("leases", "kube-system", NAME)
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("ctrl-b", 1)
    assert not a.try_acquire_or_renew() and not a.leading

    b.release()  # a clean stop: the holder cleared, the other replica takes it at once
    assert a.try_acquire_or_renew()
    lease = kube_api.get("leases", "kube-system", NAME)
    assert lease is not None and lease["spec"]["holderIdentity"] == "ctrl-a"
