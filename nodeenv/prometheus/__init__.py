"""A real Prometheus (Debian's package) for the node environment, cluster mode and `make boot`.

- `config`: prometheus.yml from typed scrape configs (static, file_sd, kubernetes_sd, TLS, bearer
  token, proxy_url) and rule files; `write_file_sd` for targets that change while it runs.
- `server`: `PrometheusServer` starts it on loopback with its TSDB under the run dir, waits for
  /-/ready, reloads, stops it by PID.
- `api`: `PrometheusApi` queries /api/v1/query, /targets, /alerts, /rules and waits on them.
"""

from nodeenv.prometheus.api import Alert, PrometheusApi, PrometheusApiError, Sample, Target
from nodeenv.prometheus.config import KubernetesSd, PrometheusConfig, ScrapeConfig, TlsConfig, write_file_sd
from nodeenv.prometheus.server import PrometheusServer, PrometheusSettings, check_config, require_binary

__all__ = [
    "Alert",
    "KubernetesSd",
    "PrometheusApi",
    "PrometheusApiError",
    "PrometheusConfig",
    "PrometheusServer",
    "PrometheusSettings",
    "Sample",
    "ScrapeConfig",
    "Target",
    "TlsConfig",
    "check_config",
    "require_binary",
    "write_file_sd",
]
