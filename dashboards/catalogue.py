# ruff: noqa: E501  -- a panel a line or two reads as a table; PromQL strings are not broken up
"""The dashboards, as data: each a title and its panels, each panel a PromQL query over the suite's
metric names (common/metric_catalogue.py, docs/monitoring.md), with Prometheus's conventions: rates
over counters, quantiles from `_bucket` histograms, no per-pod series where a sum says it.

Labels the boot's scrape job adds (nodeenv/kubelet/monitoring.py): job (the pod's
app.kubernetes.io/name), namespace, pod, node, container. grafana.py turns these into Grafana JSON,
snapshot.py into PNGs, and tests/integration/kubelet/test_boot_monitoring.py evaluates every query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["timeseries", "stat"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Panel:
    title: str
    expr: str
    legend: str = ""
    """Grafana's legend format ({{label}}); empty: the series' labels."""
    unit: str = "short"
    """A Grafana unit id: short, s, reqps, ops, percentunit, none."""
    kind: Kind = "timeseries"
    description: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)

    @property
    def file_name(self) -> str:
        return f"{self.uid}.json"


def p99(metric: str, by: str = "", match: str = "", window: str = "5m") -> str:
    """The 99th percentile of a `_seconds` histogram over `window`, per `by` labels."""
    sel = f"{metric}_bucket{{{match}}}" if match else f"{metric}_bucket"
    labels = ", ".join(["le", *([by] if by else [])])
    return f"histogram_quantile(0.99, sum by ({labels}) (rate({sel}[{window}])))"


def controller_panels(job: str) -> tuple[Panel, ...]:
    """client-go's machinery of one controller: leader, work queue, reconciles, informers."""
    j = f'job="{job}"'
    return (
        Panel(title="Leader (Lease held)", expr=f"max by (pod) (leader_election_master_status{{{j}}})",
              legend="{{pod}}", kind="stat", unit="none"),
        Panel(title="Work queue depth", expr=f"sum by (name) (workqueue_depth{{{j}}})", legend="{{name}}"),
        Panel(title="Queue adds /s", expr=f"sum(rate(workqueue_adds_total{{{j}}}[5m]))", unit="ops"),
        Panel(title="Queue wait p99", expr=p99("workqueue_queue_duration_seconds", match=j), unit="s"),
        Panel(title="Reconcile p99", expr=p99("controller_reconcile_duration_seconds", match=j), unit="s"),
        Panel(title="Reconcile errors /s", expr=f"sum(rate(controller_reconcile_errors_total{{{j}}}[5m]))",
              unit="ops"),
        Panel(title="Watch events /s by kind", expr=f"sum by (kind) (rate(informer_events_total{{{j}}}[5m]))",
              legend="{{kind}}", unit="ops"),
    )  # fmt: skip


OVERVIEW = Dashboard(
    uid="k8shost-overview",
    title="k8shost overview",
    description="The cluster at a glance: nodes, OVN RAFT, tunnels, pod creation, LB, DNS, policy, webhook, CSI.",
    panels=(
        Panel(title="Nodes (PrismNET agents up)", expr='sum(up{job="prismnet-agent"})', kind="stat", unit="none"),
        Panel(title="Targets up by job", expr="sum by (job) (up)", legend="{{job}}"),
        Panel(title="RAFT leaders per database", expr='sum by (database) (ovn_raft_role{role="leader"})',
              legend="{{database}}", description="1 wanted: 0 is no quorum, 2 a split"),
        Panel(title="northd active", expr='sum(ovn_northd_status{state="active"})', kind="stat", unit="none"),
        Panel(title="Geneve tunnels per node", expr="sum by (node) (prismnet_geneve_tunnels)",
              legend="{{node}}", description="nodes - 1 on every node"),
        Panel(title="Pods created /s (CNI ADD)",
              expr='sum(rate(prismnet_cni_requests_total{command="ADD"}[5m]))', unit="ops"),
        Panel(title="CNI ADD p99", expr=p99("prismnet_cni_request_duration_seconds", match='command="ADD"',
                                           window="15m"), unit="s"),
        Panel(title="LB pool addresses (leader)",
              expr="sum by (state) (fiberlb_pool_addresses and on (pod) "
                   '(leader_election_master_status{job="fiberlb-controller"} == 1))',
              legend="{{state}}"),
        Panel(title="DNS queries /s", expr="sum by (transport) (rate(flashdns_dns_queries_total[5m]))",
              legend="{{transport}}", unit="reqps"),
        Panel(title="Policy -> ACL p99", expr=p99("netpol_policy_to_acl_seconds", window="15m"), unit="s"),
        Panel(title="TokenReviews /s by result", expr="sum by (result) (rate(iam_webhook_reviews_total[5m]))",
              legend="{{result}}", unit="reqps"),
        Panel(title="CSI RPCs /s by code", expr="sum by (code) (rate(csi_rpc_total[5m]))",
              legend="{{code}}", unit="ops"),
    ),
)  # fmt: skip

PRISMNET = Dashboard(
    uid="k8shost-prismnet",
    title="k8shost PrismNET agent (CNI)",
    description="prismnet-agent on every node: CNI requests, IPAM, Geneve tunnels, its OVSDB connections.",
    panels=(
        Panel(title="CNI requests /s by command and code",
              expr="sum by (command, code) (rate(prismnet_cni_requests_total[5m]))",
              legend="{{command}} {{code}}", unit="ops"),
        Panel(title="CNI p99 by command", expr=p99("prismnet_cni_request_duration_seconds", by="command",
                                                  window="15m"), legend="{{command}}", unit="s"),
        Panel(title="Pod addresses (cluster CIDR)", expr="max by (state) (prismnet_ipam_addresses)",
              legend="{{state}}"),
        Panel(title="Subnet use", legend="{{subnet}}", unit="percentunit",
              expr='max by (subnet) (prismnet_ipam_subnet_addresses{state="used"}) / '
                   "max by (subnet) (sum without (state) (prismnet_ipam_subnet_addresses))"),
        Panel(title="Geneve tunnels by BFD state", expr="sum by (node, bfd) (prismnet_geneve_tunnels)",
              legend="{{node}} {{bfd}}"),
        Panel(title="OVSDB connected", expr='min by (database) (ovsdb_client_connected{job="prismnet-agent"})',
              legend="{{database}}", kind="stat", unit="none"),
        Panel(title="OVSDB transaction p99",
              expr=p99("ovsdb_client_transaction_duration_seconds", by="database", match='job="prismnet-agent"',
                       window="15m"), legend="{{database}}", unit="s"),
    ),
)  # fmt: skip

OVN_CENTRAL = Dashboard(
    uid="k8shost-ovn-central",
    title="k8shost OVN central (RAFT, northd)",
    description="ovn-central's members as their exporter sees them: RAFT role, term, commit index; northd.",
    panels=(
        Panel(title="Daemons answering", expr="sum by (target) (ovn_central_up)", legend="{{target}}"),
        Panel(title="RAFT role per member", expr="max by (pod, database, role) (ovn_raft_role) == 1",
              legend="{{pod}} {{database}} {{role}}", unit="none"),
        Panel(title="RAFT term", expr="max by (database) (ovn_raft_term)", legend="{{database}}", unit="none"),
        Panel(title="Commit index", expr="max by (pod, database) (ovn_raft_commit_index)",
              legend="{{pod}} {{database}}", unit="none"),
        Panel(title="Cluster servers", expr="min by (database) (ovn_raft_cluster_servers)",
              legend="{{database}}", kind="stat", unit="none"),
        Panel(title="northd state", expr="sum by (state) (ovn_northd_status)", legend="{{state}}", unit="none"),
    ),
)  # fmt: skip

FIBERLB = Dashboard(
    uid="k8shost-fiberlb",
    title="k8shost FiberLB controller",
    description="LoadBalancer Services: the external pool, allocation failures, Service -> status latency.",
    panels=(
        Panel(title="Pool addresses by state (per replica)", expr="max by (pod, state) (fiberlb_pool_addresses)",
              legend="{{pod}} {{state}}"),
        Panel(title="Services waiting for an IP", expr="max(fiberlb_services_waiting_for_ip)", kind="stat"),
        Panel(title="Service -> status p99", expr=p99("fiberlb_service_status_seconds", window="15m"), unit="s"),
        *controller_panels("fiberlb-controller"),
    ),
)  # fmt: skip

FLASHDNS = Dashboard(
    uid="k8shost-flashdns",
    title="k8shost FlashDNS (cluster DNS)",
    description="The cluster DNS: queries, answers by rcode, latency, cache, forwarding, the zone.",
    panels=(
        Panel(title="Queries /s by transport", expr="sum by (transport) (rate(flashdns_dns_queries_total[5m]))",
              legend="{{transport}}", unit="reqps"),
        Panel(title="Responses /s by rcode", expr="sum by (rcode) (rate(flashdns_dns_responses_total[5m]))",
              legend="{{rcode}}", unit="reqps"),
        Panel(title="Answer p99", expr=p99("flashdns_dns_request_duration_seconds", by="transport",
                                          window="15m"), legend="{{transport}}", unit="s"),
        Panel(title="Cache hits /s", expr="sum(rate(flashdns_dns_cache_hits_total[5m]))", unit="ops"),
        Panel(title="Forwarded /s", expr="sum(rate(flashdns_dns_forwarded_total[5m]))", unit="ops"),
        Panel(title="Names in the zone", expr="max(flashdns_zone_names)", kind="stat", unit="none"),
        *controller_panels("flashdns-controller"),
    ),
)  # fmt: skip

NETPOL = Dashboard(
    uid="k8shost-netpol",
    title="k8shost NetworkPolicy controller",
    description="NetworkPolicies as OVN ACLs: change -> ACL latency, apply time, rows owned.",
    panels=(
        Panel(title="Policy -> ACL p99", expr=p99("netpol_policy_to_acl_seconds", window="15m"), unit="s"),
        Panel(title="Apply (translate + NB) p99", expr=p99("netpol_apply_seconds", window="15m"), unit="s"),
        Panel(title="OVN rows owned by table", expr="max by (table) (netpol_ovn_objects)", legend="{{table}}"),
        Panel(title="Invalid policies", expr="max(netpol_invalid_policies)", kind="stat", unit="none"),
        *controller_panels("netpol-controller"),
    ),
)  # fmt: skip

WEBHOOK = Dashboard(
    uid="k8shost-iam-webhook",
    title="k8shost IAM webhook",
    description="TokenReviews from kube-apiserver: results, latency, keys and their refresh, the cache.",
    panels=(
        Panel(title="Reviews /s by result", expr="sum by (result) (rate(iam_webhook_reviews_total[5m]))",
              legend="{{result}}", unit="reqps"),
        Panel(title="Review p99", expr=p99("iam_webhook_review_duration_seconds", window="15m"), unit="s"),
        Panel(title="Verification keys", expr="min(iam_webhook_keys)", kind="stat", unit="none"),
        Panel(title="Key set age", expr="max(iam_webhook_keyset_age_seconds)", unit="s"),
        Panel(title="JWKS refresh failures /s", expr="sum(rate(iam_webhook_jwks_refresh_failures_total[5m]))",
              unit="ops"),
        Panel(title="Cache hit ratio", expr="avg(iam_webhook_cache_hit_ratio)", unit="percentunit"),
    ),
)  # fmt: skip

CSI = Dashboard(
    uid="k8shost-lightningstor-csi",
    title="k8shost LightningStor CSI",
    description="CSI calls of the controller and node plugins: rate by RPC and gRPC code, latency.",
    panels=(
        Panel(title="RPCs /s by method and code", expr="sum by (job, method, code) (rate(csi_rpc_total[5m]))",
              legend="{{job}} {{method}} {{code}}", unit="ops"),
        Panel(title="p99 by method", expr=p99("csi_rpc_duration_seconds", by="method", window="15m"),
              legend="{{method}}", unit="s"),
    ),
)  # fmt: skip

NODES = Dashboard(
    uid="k8shost-node-controller",
    title="k8shost node controller",
    description="node-controller: OVN state of Nodes that went away.",
    panels=(
        Panel(title="Nodes released", expr="sum(prismnet_nodes_released_total)", kind="stat", unit="none"),
        *controller_panels("node-controller"),
    ),
)  # fmt: skip

PROJECTS = Dashboard(
    uid="k8shost-project-controller",
    title="k8shost project controller",
    description="project-controller: the RBAC, quotas and policies of project namespaces.",
    panels=controller_panels("project-controller"),
)

DASHBOARDS = (OVERVIEW, PRISMNET, OVN_CENTRAL, FIBERLB, FLASHDNS, NETPOL, WEBHOOK, CSI, NODES, PROJECTS)
