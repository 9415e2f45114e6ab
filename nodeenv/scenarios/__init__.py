"""Sandbox scenario parts, run in this order by `make sandbox`. Each module has run(Scenario)."""

from nodeenv.scenarios import (
    admin_kubectl,
    admin_policy,
    cni,
    cold_restart,
    csi,
    dataplane,
    db_bounds,
    e2e_volume,
    escapes,
    fiberlb,
    flashdns,
    kubeapi,
    kubectl_reach,
    metrics,
    monitoring,
    nb_rebuild,
    nb_rows_kept,
    node_failure,
    node_rejoin,
    ovn_alive,
    ovn_programs,
    ovn_tls,
    plasmacloud,
    pod_security,
    podman,
    rollouts,
    socket_paths,
    spec_times,
    tenancy,
    tenant_data,
    upgrade,
    verdict_log,
    webhook,
)

SCENARIOS = (
    ovn_alive,
    ovn_programs,  # every OVN/OVS daemon's /proc/<pid>/exe in build/ovn-trixie, and its version
    socket_paths, kubeapi, webhook, cni, podman, csi, e2e_volume, flashdns, fiberlb, tenancy,
    admin_policy,  # after tenancy, on its pods: projects isolated by the platform's ANPs
    escapes, tenant_data, pod_security,
    metrics,  # every daemon's /metrics: the catalogue's names, tunnels, a pod's ADD counted
    admin_kubectl,  # kubectl create deployment as protobuf, default ServiceAccounts, APIServices
    kubectl_reach,  # kubectl logs and exec through a kubelet API (a node of its own)
    dataplane,  # a pod refused at OVN's database ports; a spoofed source dropped
    rollouts,  # ReplicaSets and revisions from the controllers' pass; the Metrics API
    upgrade,  # PodDisruptionBudgets served; the overlay's update strategies and budgets
    verdict_log,  # a policy drop in prismnet-agent's verdict log (JSON line) and counter
    nb_rows_kept,  # a management switch deleted under its agent comes back; an overlapping one refused
    plasmacloud,  # TLS and an IAM token on every PlasmaCloud call; calls without refused
    ovn_tls,  # OVN's NB refuses plaintext and certificate-less clients (a cluster only)
    monitoring,  # a cluster only: every Prometheus target up; an alert fired by a fault, resolved
    cold_restart,  # a cluster only: every daemon killed at once and started again, pods kept
    db_bounds,  # a cluster only: NB/SB file sizes and free disk exported; a compaction shrinks them
    node_rejoin,  # a cluster only: runs every earlier cleanup first; the last node rebooted, reinstalled
    nb_rebuild,  # a cluster only: after every earlier cleanup, the NB and the SB wiped and rebuilt
    node_failure,  # a cluster only: runs every earlier cleanup first, then kills a node
    spec_times,  # last: the spec's performance requirements beside the measured steps
)  # fmt: skip
