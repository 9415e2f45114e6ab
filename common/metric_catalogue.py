"""Every metric the suite's daemons export: the one list the table in docs/monitoring.md, the
dashboards and the alert rules are written against (a unit test renders that table from it and
compares; another checks each component's registry against it; the cluster test scrapes every
daemon for it).

Labels are bounded by construction: a label never carries a tenant's text (pod, namespace, Service
names) or an address a tenant chooses; the values each can take are given in `meaning`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    """As scraped (a counter with its `_total`, a histogram without `_bucket`/`_sum`/`_count`)."""
    type: str
    labels: tuple[str, ...]
    components: tuple[str, ...]
    meaning: str


AGENT = "prismnet-agent :9465"
NETPOL = "netpol-controller :9830"
PROJECTS = "project-controller :9831"
NODES = "node-controller :9832"
FIBERLB = "fiberlb-controller :9835"
FLASHDNS = "flashdns-controller :9153"
CSI = "lightningstor-csi controller :9810, node :9811"
WEBHOOK = "iam-webhook :3001"
CENTRAL = "ovn-central-exporter :9476"

CONTROLLERS = (NETPOL, PROJECTS, NODES, FIBERLB, FLASHDNS)
OVN_CLIENTS = (AGENT, NETPOL, NODES, FIBERLB)
"""Components holding an ovsdbapp connection (fiberlb-controller with `--backend=ovn`)."""


def _m(name: str, type_: str, labels: str, components: tuple[str, ...], meaning: str) -> MetricSpec:
    return MetricSpec(name, type_, tuple(labels.split()), components, meaning)


CATALOGUE: tuple[MetricSpec, ...] = (
    # --- the controller machinery (client-go's names) ---
    _m(
        "workqueue_depth",
        "gauge",
        "name",
        CONTROLLERS,
        "Keys waiting in the work queue `name` (one per controller)",
    ),
    _m("workqueue_adds_total", "counter", "name", CONTROLLERS, "Keys added to the work queue"),
    _m(
        "workqueue_queue_duration_seconds",
        "histogram",
        "name",
        CONTROLLERS,
        "Time a key waits in the queue before a worker takes it",
    ),
    _m(
        "workqueue_work_duration_seconds", "histogram", "name", CONTROLLERS, "Time a worker spends on one key"
    ),
    _m("workqueue_retries_total", "counter", "name", CONTROLLERS, "Rate-limited re-adds of failed keys"),
    _m(
        "workqueue_unfinished_work_seconds",
        "gauge",
        "name",
        CONTROLLERS,
        "Seconds of work in progress not yet observed by work_duration (stuck workers make it grow)",
    ),
    _m(
        "workqueue_longest_running_processor_seconds",
        "gauge",
        "name",
        CONTROLLERS,
        "Seconds the longest-running worker of the queue has been on its key",
    ),
    _m(
        "leader_election_master_status",
        "gauge",
        "name",
        CONTROLLERS,
        "1 while this replica holds the Lease `name`, else 0",
    ),
    _m(
        "controller_reconcile_duration_seconds",
        "histogram",
        "controller",
        CONTROLLERS,
        "Time of one reconcile",
    ),
    _m("controller_reconcile_errors_total", "counter", "controller", CONTROLLERS, "Reconciles that raised"),
    _m(
        "informer_events_total",
        "counter",
        "kind type",
        CONTROLLERS,
        "Watch events received, by resource (plural) and ADDED/MODIFIED/DELETED",
    ),
    _m("informer_relists_total", "counter", "kind", CONTROLLERS, "Full lists (start, 410 Gone, resync)"),
    _m("informer_watch_errors_total", "counter", "kind", CONTROLLERS, "Watch connections that failed"),
    _m("events_dropped_total", "counter", "reason", CONTROLLERS, "Events not sent (rate_limit, api_error)"),
    # --- every OVSDB client (ovnaccess) ---
    _m(
        "ovsdb_client_connected",
        "gauge",
        "database",
        OVN_CLIENTS,
        "1 while connected (for a RAFT cluster: to its leader) to Open_vSwitch/OVN_Northbound/OVN_Southbound",
    ),
    _m(
        "ovsdb_client_server_info",
        "gauge",
        "database server",
        OVN_CLIENTS,
        "1 for the server the connection is on (a cluster: its leader), one of the configured remotes",
    ),
    _m(
        "ovsdb_client_reconnects_total",
        "counter",
        "database",
        OVN_CLIENTS,
        "Times the connection was made again (a new leader elected, a member lost, a server back)",
    ),
    _m(
        "ovsdb_client_transaction_duration_seconds",
        "histogram",
        "database",
        OVN_CLIENTS,
        "Time from commit to the server's answer, retries included",
    ),
    _m(
        "ovsdb_client_transaction_errors_total",
        "counter",
        "database",
        OVN_CLIENTS,
        "Transactions that ended in an error (not committed, no answer, refused)",
    ),
    # --- prismnet-agent ---
    _m(
        "prismnet_cni_requests_total",
        "counter",
        "command code",
        (AGENT,),
        "CNI requests by command (ADD, DEL, CHECK, GC, STATUS) and result code (0 ok, else its CNI code)",
    ),
    _m("prismnet_cni_request_duration_seconds", "histogram", "command", (AGENT,), "CNI request latency"),
    _m(
        "prismnet_ipam_subnet_addresses",
        "gauge",
        "subnet state",
        (AGENT,),
        "Addresses of one namespace subnet, state used|free; `subnet` is the CIDR the agent carved "
        "(at most cluster CIDR / subnet prefix series, never a tenant's name)",
    ),
    _m(
        "prismnet_ipam_addresses",
        "gauge",
        "state",
        (AGENT,),
        "Pod addresses of the whole cluster CIDR: used, free (carved subnets' free plus uncarved space)",
    ),
    _m(
        "prismnet_switch_subnet_overlaps_refused_total",
        "counter",
        "",
        (AGENT,),
        "Logical switches not created: their subnet overlapped another switch's (the log names both)",
    ),
    _m(
        "prismnet_geneve_tunnels",
        "gauge",
        "bfd",
        (AGENT,),
        "Geneve tunnel interfaces of this node's OVS (one per other chassis), by BFD state up|down|off",
    ),
    _m(
        "prismnet_ovn_controller_up",
        "gauge",
        "",
        (AGENT,),
        "1 when this node's ovn-controller answers its control socket (with --ovn-rundir; else absent)",
    ),
    # --- fiberlb-controller ---
    _m("fiberlb_pool_addresses", "gauge", "state", (FIBERLB,), "External IP pool addresses, state used|free"),
    _m(
        "fiberlb_allocation_failures_total",
        "counter",
        "reason",
        (FIBERLB,),
        "External IP allocations refused: exhausted (pool empty), unavailable (the requested IP is taken or "
        "outside the pool)",
    ),
    _m(
        "fiberlb_service_status_seconds",
        "histogram",
        "",
        (FIBERLB,),
        "From a LoadBalancer Service seen without its address to status.loadBalancer written",
    ),
    _m("fiberlb_services_waiting_for_ip", "gauge", "", (FIBERLB,), "Services of our class waiting for an IP"),
    # --- flashdns-controller (embedded server) ---
    _m("flashdns_dns_queries_total", "counter", "transport", (FLASHDNS,), "DNS queries received (udp|tcp)"),
    _m(
        "flashdns_dns_responses_total",
        "counter",
        "rcode",
        (FLASHDNS,),
        "Responses sent by rcode (NOERROR, NXDOMAIN, SERVFAIL, REFUSED, FORMERR, NOTIMP, other)",
    ),
    _m(
        "flashdns_dns_request_duration_seconds",
        "histogram",
        "transport",
        (FLASHDNS,),
        "Query received to response sent",
    ),
    _m("flashdns_dns_cache_hits_total", "counter", "", (FLASHDNS,), "UDP answers replayed from cache"),
    _m("flashdns_dns_forwarded_total", "counter", "", (FLASHDNS,), "Queries forwarded upstream"),
    _m("flashdns_dns_forward_failures_total", "counter", "", (FLASHDNS,), "Forwards that failed"),
    _m(
        "flashdns_dns_rate_limited_total", "counter", "action", (FLASHDNS,), "Responses held back (slip|drop)"
    ),
    _m("flashdns_zone_names", "gauge", "", (FLASHDNS,), "Names in the cluster zone"),
    _m("flashdns_zone_records", "gauge", "", (FLASHDNS,), "Resource records in the cluster zone"),
    # --- netpol-controller ---
    _m(
        "netpol_policy_to_acl_seconds",
        "histogram",
        "",
        (NETPOL,),
        "From a NetworkPolicy/Pod/Namespace change seen to its ACLs committed in NB",
    ),
    _m("netpol_apply_seconds", "histogram", "", (NETPOL,), "Translate + NB transaction of one reconcile"),
    _m("netpol_ovn_objects", "gauge", "table", (NETPOL,), "OVN rows this controller owns, by table"),
    _m("netpol_invalid_policies", "gauge", "", (NETPOL,), "NetworkPolicies skipped as invalid"),
    # --- node-controller ---
    _m("prismnet_nodes_released_total", "counter", "", (NODES,), "Nodes whose OVN state was released"),
    # --- iam-webhook ---
    _m(
        "iam_webhook_reviews_total",
        "counter",
        "result",
        (WEBHOOK,),
        "TokenReviews answered: authenticated, rejected, bad_request, forbidden, unavailable, error",
    ),
    _m("iam_webhook_review_duration_seconds", "histogram", "", (WEBHOOK,), "Time to answer a TokenReview"),
    _m(
        "iam_webhook_jwks_refresh_failures_total",
        "counter",
        "",
        (WEBHOOK,),
        "JWKS fetches that failed (the last good keys are kept)",
    ),
    _m("iam_webhook_keys", "gauge", "", (WEBHOOK,), "Verification keys loaded"),
    _m(
        "iam_webhook_keyset_age_seconds",
        "gauge",
        "",
        (WEBHOOK,),
        "Seconds since the key sources last loaded (+Inf: never)",
    ),
    _m("iam_webhook_cache_lookups_total", "counter", "result", (WEBHOOK,), "Review cache lookups (hit|miss)"),
    _m("iam_webhook_cache_hit_ratio", "gauge", "", (WEBHOOK,), "Review cache hits / lookups"),
    # --- lightningstor-csi ---
    _m("csi_rpc_total", "counter", "method code", (CSI,), "CSI RPCs by method and gRPC status code"),
    _m("csi_rpc_duration_seconds", "histogram", "method", (CSI,), "CSI RPC latency"),
    # --- ovn-central-exporter (a sidecar of each ovn-central member) ---
    _m(
        "ovn_central_up",
        "gauge",
        "target",
        (CENTRAL,),
        "1 when the target (nb, sb, northd) answered its control socket",
    ),
    _m(
        "ovn_raft_role",
        "gauge",
        "database role",
        (CENTRAL,),
        "1 for this member's RAFT role (leader|follower|candidate) of the database, 0 for the others",
    ),
    _m("ovn_raft_term", "gauge", "database", (CENTRAL,), "This member's RAFT term"),
    _m("ovn_raft_commit_index", "gauge", "database", (CENTRAL,), "This member's RAFT commit index"),
    _m(
        "ovn_raft_cluster_servers",
        "gauge",
        "database",
        (CENTRAL,),
        "Servers in the cluster as this member sees it",
    ),
    _m(
        "ovn_raft_failed",
        "gauge",
        "database",
        (CENTRAL,),
        "1 while this member is in RAFT's failure mode after an I/O error (a full disk): restart it",
    ),
    _m("ovn_db_file_bytes", "gauge", "database", (CENTRAL,), "Size of this member's database file"),
    _m(
        "ovn_db_filesystem_free_bytes",
        "gauge",
        "database",
        (CENTRAL,),
        "Bytes free on the filesystem of this member's database file",
    ),
    _m(
        "ovn_northd_status", "gauge", "state", (CENTRAL,), "1 for this northd's state (active|standby|paused)"
    ),
)


def by_component(component: str) -> list[MetricSpec]:
    return [m for m in CATALOGUE if component in m.components]


def markdown_table() -> str:
    """docs/monitoring.md's table (tests/unit/common/test_metric_catalogue.py keeps the page equal to it)."""
    rows = ["| metric | type | labels | component :port | meaning |", "|---|---|---|---|---|"]
    for m in CATALOGUE:
        where = "all controllers" if m.components == CONTROLLERS else ", ".join(m.components)
        where = "every OVSDB client" if m.components == OVN_CLIENTS else where
        meaning = m.meaning.replace("|", "\\|")  # a cell's own bar would end it
        rows.append(f"| `{m.name}` | {m.type} | {', '.join(m.labels) or '-'} | {where} | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
