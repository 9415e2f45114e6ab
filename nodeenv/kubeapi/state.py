"""What one running double holds: settings, store, verbs, tokens, the request record, faults."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.kubeapi.auditlog import AuditLog
from nodeenv.kubeapi.auth import Recorder, Tokens, User
from nodeenv.kubeapi.crud import Resources
from nodeenv.kubeapi.durable import Journal
from nodeenv.kubeapi.errors import ApiError, from_code
from nodeenv.kubeapi.kinds import Registry
from nodeenv.kubeapi.kubeletclient import KubeletClientConfig
from nodeenv.kubeapi.metrics import Metrics
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.rbac import Authorizer
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.store import Store
from nodeenv.kubeapi.tokenwebhook import WebhookAuthenticator, WebhookConfig
from nodeenv.kubeapi.views import Views


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiConfig:
    service_cidr: str = "10.96.0.0/16"
    bookmark_interval: float = 60.0
    """Seconds between BOOKMARK events on watches that allow them (the real server: about a minute)."""
    watch_timeout: float = 1800.0
    """A watch without timeoutSeconds ends after this (kube-apiserver's --min-request-timeout)."""
    history_limit: int = 100_000
    """Events kept for watches from an older resourceVersion; older ones get 410."""
    compaction_interval: float = 300.0
    """Seconds between compactions of the history (kube-apiserver's --etcd-compaction-interval; 0: never)."""
    enforce_rbac: bool = False
    """Authorize non-admin users by the Roles/ClusterRoles and bindings in the store (opt-in)."""
    enforce_quota: bool = False
    """ResourceQuota object counts: admission and status (opt-in; see quota.py)."""
    audit_log_path: Path | None = None
    """Every request also written here as an audit.k8s.io/v1 Event (auditlog.py); None: not at all."""
    audit_log_maxsize: int = 100
    """MB before the audit log is rotated (0: never)"""
    audit_log_maxbackup: int = 1
    """rotated audit log files kept"""
    token_webhook_config: Path | None = None
    """kube-apiserver's --authentication-token-webhook-config-file: bearer tokens the static table
    does not know go to this TokenReview webhook (tokenwebhook.py); None: only the static table."""
    token_webhook_cache_ttl: float = 120.0
    """--authentication-token-webhook-cache-ttl, seconds (kube-apiserver's default 2m)"""
    token_webhook_version: str = "v1"
    """--authentication-token-webhook-version"""
    pod_security: PodSecurityConfig = field(default_factory=PodSecurityConfig)
    """The PodSecurity admission plugin's defaults and exemptions (default: privileged, none)."""
    event_ttl: float = 3600.0
    """--event-ttl, seconds: an Event not written for this long is deleted (eventttl.py; 0: never)."""
    kubelet: KubeletClientConfig = field(default_factory=KubeletClientConfig)
    """How the nodes' kubelet APIs are reached (pods/log, exec, attach, portforward)."""
    data_dir: Path | None = None
    """Where the objects are kept across restarts (durable.py; k3s's kine datastore); None: in memory."""


@dataclass(kw_only=True)
class Fault:
    """Make the next `times` requests matching verb/resource (and namespace/name when set) fail with
    `code` (a Status of the matching reason), or just wait `delay` seconds first when code is 0."""

    verb: str = "*"
    resource: str = "*"
    namespace: str | None = None
    name: str | None = None
    code: int = 500
    times: int = 1
    delay: float = 0.0
    message: str = "injected fault"

    def matches(self, info: RequestInfo) -> bool:
        return (
            self.times > 0
            and self.verb in ("*", info.verb)
            and self.resource in ("*", info.resource)
            and self.namespace in (None, info.namespace)
            and self.name in (None, info.name)
        )

    def error(self) -> ApiError | None:
        if not self.code:
            return None
        return from_code(self.code, self.message)


@dataclass
class ApiState:
    config: ApiConfig
    registry: Registry = field(default_factory=Registry)
    store: Store = field(init=False)
    resources: Resources = field(init=False)
    tokens: Tokens = field(default_factory=Tokens)
    recorder: Recorder = field(default_factory=Recorder)
    faults: list[Fault] = field(default_factory=list)
    fault_lock: threading.Lock = field(default_factory=threading.Lock)
    authorizer: Authorizer | None = None
    token_webhook: WebhookAuthenticator | None = None
    metrics: Metrics = field(init=False)
    views: Views = field(init=False)

    def __post_init__(self) -> None:
        self.store = Store(self.config.history_limit, self.config.compaction_interval)
        self.metrics = Metrics(self.store)
        self.views = Views(self.registry)
        self.resources = Resources(
            self.store,
            self.registry,
            self.config.service_cidr,
            quotas=self.config.enforce_quota,
            pod_security=self.config.pod_security,
            event_ttl=self.config.event_ttl,
        )
        self._open_store()
        if self.config.enforce_rbac:
            self.authorizer = Authorizer(self.store, self.registry)
        c = self.config
        if c.token_webhook_config is not None:
            self.token_webhook = WebhookAuthenticator(
                WebhookConfig.load(c.token_webhook_config),
                version=c.token_webhook_version,
                ttl=c.token_webhook_cache_ttl,
            )
        if c.audit_log_path is not None:
            self.recorder.audit_log = AuditLog(c.audit_log_path, c.audit_log_maxsize, c.audit_log_maxbackup)

    def _open_store(self) -> None:
        """The objects read back from --data-dir (derived state rebuilt), else a fresh start's."""
        if self.config.data_dir is None:
            self.resources.bootstrap()
            return
        journal = Journal(self.config.data_dir)
        objs, rv = journal.load()
        self.store.journal = journal
        if rv:
            self.store.load(objs, rv)
            self.resources.restore()
        else:
            self.resources.bootstrap()

    async def authenticate(self, header: str | None) -> User | None:
        """kube-apiserver's order: the static tokens first, then the token webhook."""
        user = self.tokens.authenticate(header)
        if user is not None or self.token_webhook is None or not header or not header.startswith("Bearer "):
            return user
        token = header[7:].strip()
        return await self.token_webhook.authenticate(token) if token else None

    def take_fault(self, info: RequestInfo) -> Fault | None:
        with self.fault_lock:
            for f in self.faults:
                if f.matches(info):
                    f.times -= 1
                    return f
        return None
