"""Prometheus metrics of the machinery, on one registry per ControllerApp (tests run several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

RECONCILE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
QUEUE_BUCKETS = (0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0)


class MachineryMetrics:
    """Work queue, reconcile, informer and leader-election figures, labelled by name (client-go's
    workqueue_* and leader_election_master_status names, so its dashboards and alerts apply)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.queue_depth = Gauge("workqueue_depth", "Keys waiting in the work queue", ["name"], registry=r)
        self.queue_adds = Counter("workqueue_adds", "Keys added to the work queue", ["name"], registry=r)
        self.queue_retries = Counter(
            "workqueue_retries", "Rate-limited re-adds of failed keys", ["name"], registry=r
        )
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "Time a key waits in the queue before a worker takes it",
            ["name"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Time a worker spends on one key (get to done)",
            ["name"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by workqueue_work_duration_seconds",
            ["name"],
            registry=r,
        )
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running worker of the queue has been on its key",
            ["name"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "controller_reconcile_duration_seconds",
            "Time of one reconcile of one key",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_reconcile_errors", "Reconciles that raised", ["controller"], registry=r
        )
        self.informer_events = Counter(
            "informer_events", "Watch events received, by kind and type", ["kind", "type"], registry=r
        )
        self.informer_relists = Counter(
            "informer_relists", "Full lists (start, 410 Gone, resync)", ["kind"], registry=r
        )
        self.informer_watch_errors = Counter(
            "informer_watch_errors", "Watch connections that failed and were retried", ["kind"], registry=r
        )
        self.leader_status = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the Lease `name`",
            ["name"],
            registry=r,
        )
        self.events_dropped = Counter(
            "events_dropped", "Events not sent (rate limit or API error)", ["reason"], registry=r
        )
