"""The only reader of argv and the environment for the common flags of every controller.

Every flag falls back to an environment variable: KUBECONFIG, POD_NAME and POD_NAMESPACE as
Kubernetes and the downward API name them, the others prefixed per program (e.g.
FIBERLB_LEADER_ELECT). A controller adds its own flags through `add_arguments` and reads them
from `ControllerSettings.args`.
"""

from __future__ import annotations

import argparse
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controllers.machinery.leader import LeaseSettings

AddArguments = Callable[[argparse.ArgumentParser, Mapping[str, str]], None]
SA_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSettings:
    program: str
    kubeconfig: Path | None = None
    """None: in-cluster config (service account) when in a pod, else ~/.kube/config."""
    in_cluster: bool = False
    leader_elect: bool = True
    lease: LeaseSettings
    metrics_host: str = "0.0.0.0"
    metrics_port: int | None = 8080
    """/metrics, /healthz, /readyz over plain HTTP (None: off; 0: pick a free port)."""
    workers: int = 2
    log_level: str = "info"
    instance: str
    """reportingInstance of our Events: the pod name, else the host name."""
    args: argparse.Namespace = field(default_factory=argparse.Namespace)
    """The controller's own flags (from add_arguments)."""


def parse_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


def parse_address(value: str) -> tuple[str, int | None]:
    """ "host:port" (":8080" = all interfaces; the default is loopback) or "off"."""
    if value.strip().lower() in ("off", "none", ""):
        return "", None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--metrics-address must be host:port or 'off', not {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def build_parser(
    program: str, description: str, prefix: str, env: Mapping[str, str]
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=program, description=description)

    def add(flag: str, var: str, default: str, help: str, **kw: Any) -> None:
        p.add_argument(flag, default=env.get(var, default), help=f"{help} (env {var}; default {default!r})",
                       **kw)  # fmt: skip

    add(
        "--kubeconfig",
        "KUBECONFIG",
        "",
        "kubeconfig file; empty: in-cluster config in a pod, else ~/.kube/config",
    )
    add("--leader-elect", f"{prefix}LEADER_ELECT", "true", "elect a leader on a Lease; only it reconciles",
        nargs="?", const="true")  # fmt: skip
    add("--leader-elect-lease-name", f"{prefix}LEADER_ELECT_LEASE_NAME", program, "Lease name")
    add("--leader-elect-lease-namespace", f"{prefix}LEADER_ELECT_LEASE_NAMESPACE",
        env.get("POD_NAMESPACE", "kube-system"), "Lease namespace (default: POD_NAMESPACE)")  # fmt: skip
    add("--leader-elect-lease-duration", f"{prefix}LEADER_ELECT_LEASE_DURATION", "15",
        "seconds a follower waits after the last renewal before taking over")  # fmt: skip
    add("--leader-elect-renew-deadline", f"{prefix}LEADER_ELECT_RENEW_DEADLINE", "10",
        "seconds the leader keeps retrying a renewal before it stops leading")  # fmt: skip
    add("--leader-elect-retry-period", f"{prefix}LEADER_ELECT_RETRY_PERIOD", "2", "seconds between attempts")
    add("--leader-elect-identity", f"{prefix}LEADER_ELECT_IDENTITY", "",
        "holder identity (default: POD_NAME or host name, plus a random suffix)")  # fmt: skip
    add(
        "--metrics-address",
        f"{prefix}METRICS_ADDRESS",
        "127.0.0.1:8080",
        "host:port of /metrics, /healthz, /readyz, or off (a host-network pod: give the node's address)",
    )
    add("--workers", f"{prefix}WORKERS", "2", "concurrent reconciles per controller")
    add("--log-level", f"{prefix}LOG_LEVEL", "info", "debug, info, warning or error")
    return p


def settings_from_args(
    program: str, a: argparse.Namespace, env: Mapping[str, str], own: argparse.Namespace
) -> ControllerSettings:
    instance = env.get("POD_NAME") or socket.gethostname()
    host, port = parse_address(a.metrics_address)
    lease = LeaseSettings(
        name=a.leader_elect_lease_name,
        namespace=a.leader_elect_lease_namespace,
        identity=a.leader_elect_identity or f"{instance}_{uuid.uuid4()}",
        lease_duration=float(a.leader_elect_lease_duration),
        renew_deadline=float(a.leader_elect_renew_deadline),
        retry_period=float(a.leader_elect_retry_period),
    )
    workers = int(a.workers)
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    return ControllerSettings(
        program=program,
        kubeconfig=Path(a.kubeconfig) if a.kubeconfig else None,
        in_cluster=bool(env.get("KUBERNETES_SERVICE_HOST")) and SA_TOKEN.exists(),
        leader_elect=parse_bool(a.leader_elect),
        lease=lease,
        metrics_host=host,
        metrics_port=port,
        workers=workers,
        log_level=a.log_level,
        instance=instance,
        args=own,
    )


COMMON = {"kubeconfig", "leader_elect", "leader_elect_lease_name", "leader_elect_lease_namespace",
          "leader_elect_lease_duration", "leader_elect_renew_deadline", "leader_elect_retry_period",
          "leader_elect_identity", "metrics_address", "workers", "log_level"}  # fmt: skip


def parse(
    program: str,
    description: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    prefix: str = "",
    add_arguments: AddArguments | None = None,
) -> ControllerSettings:
    """Parse argv (exits with usage on bad input, like argparse)."""
    parser = build_parser(program, description, prefix, env)
    if add_arguments is not None:
        add_arguments(parser, env)
    a = parser.parse_args(list(argv))
    own = argparse.Namespace(**{k: v for k, v in vars(a).items() if k not in COMMON})
    try:
        return settings_from_args(program, a, env, own)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
        parser.error(str(e))
        raise  # unreachable: parser.error exits
