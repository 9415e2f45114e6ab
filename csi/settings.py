"""The only place that reads argv and the environment for `lightningstor-csi`."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

from common.plasmacloud_grpc import PlasmaCloudAuth, add_flags

DRIVER_NAME = "stor.plasmacloud.io"
VENDOR_VERSION = "0.1.0"
TOPOLOGY_KEY = "topology.stor.plasmacloud.io/node"
DEFAULT_ENDPOINT = f"unix:///var/lib/kubelet/plugins/{DRIVER_NAME}/csi.sock"

Mode = Literal["controller", "node", "all"]
BackendKind = Literal["local", "lightningstor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CsiSettings:
    mode: Mode = "all"
    endpoint: str = DEFAULT_ENDPOINT
    """unix:///path/to/csi.sock, where kubelet or the sidecars call us."""
    node_id: str = ""
    backend: BackendKind = "local"
    state_dir: Path = Path("/var/lib/lightningstor-csi")
    """local backend: volume files, snapshots and state.json live here."""
    lightningstor_endpoint: str = ""
    """lightningstor backend: host:port or unix:///path of the VolumeService."""
    lightningstor_timeout: float = 10.0
    plasmacloud: PlasmaCloudAuth | None = None
    """lightningstor backend: the CA and IAM token file of its TLS + token calls (required)."""
    metrics_address: str = ""
    """host:port for the Prometheus /metrics endpoint; empty disables it."""
    max_volumes_per_node: int | None = None
    """Reported by NodeGetInfo and enforced by ControllerPublishVolume; 0 = unlimited;
    None (auto) = the loop devices the node's kernel can hold for the local backend, 0 otherwise."""
    qos_cgroup: str = "auto"
    """cgroup directory whose io.max (v2) or blkio.throttle files (v1) carry volume I/O limits;
    auto: kubepods.slice/kubepods under a v2 root with the io controller, else the v1 blkio root."""
    capacity_bytes: int = 0
    """local backend: the most bytes all volumes together may provision; 0 = size of the state dir's fs."""
    default_fs_type: str = "ext4"
    """fs_type for mount volumes whose capability names none: ext4, xfs, or auto (ext4 when this
    process may grow ext4 online, i.e. holds CAP_SYS_RESOURCE, else xfs)."""
    workers: int = 16
    log_level: str = "info"

    @property
    def socket_path(self) -> Path:
        if not self.endpoint.startswith("unix://"):
            raise ValueError(f"endpoint must be unix:///path, got {self.endpoint!r}")
        return Path(self.endpoint.removeprefix("unix://"))

    def resolved_max_volumes(self, loop_capacity: int) -> int:
        if self.max_volumes_per_node is not None:
            return self.max_volumes_per_node
        return loop_capacity if self.backend == "local" else 0

    def resolved_fs_type(self, can_grow_ext4_online: bool) -> str:
        if self.default_fs_type != "auto":
            return self.default_fs_type
        return "ext4" if can_grow_ext4_online else "xfs"

    @property
    def serves_controller(self) -> bool:
        return self.mode in ("controller", "all")

    @property
    def serves_node(self) -> bool:
        return self.mode in ("node", "all")

    @classmethod
    def from_args(cls, argv: Sequence[str], env: Mapping[str, str]) -> Self:
        args = _parser(env).parse_args(list(argv))
        settings = cls(
            mode=args.mode,
            endpoint=args.endpoint,
            node_id=args.node_id or socket.gethostname(),
            backend=args.backend,
            state_dir=Path(args.state_dir),
            lightningstor_endpoint=args.lightningstor_endpoint,
            plasmacloud=PlasmaCloudAuth.from_args(args) if args.backend == "lightningstor" else None,
            metrics_address=args.metrics_address,
            max_volumes_per_node=_count_or_auto(args.max_volumes_per_node),
            qos_cgroup=args.qos_cgroup,
            capacity_bytes=args.capacity_bytes,
            default_fs_type=args.default_fs_type,
            workers=args.workers,
            log_level=args.log_level,
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        _ = self.socket_path
        if self.backend == "lightningstor" and not self.lightningstor_endpoint:
            raise ValueError("--backend lightningstor needs --lightningstor-endpoint")
        if self.backend == "lightningstor" and self.plasmacloud is None:
            raise ValueError("--backend lightningstor needs --plasmacloud-ca and --plasmacloud-token-file")
        max_volumes = self.max_volumes_per_node or 0
        if max_volumes < 0 or self.capacity_bytes < 0 or self.workers < 1:
            raise ValueError("--max-volumes-per-node/--capacity-bytes must be >= 0, --workers >= 1")


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    d = CsiSettings()
    p = argparse.ArgumentParser(
        prog="lightningstor-csi",
        description=f"LightningStor CSI driver {DRIVER_NAME}: Identity, Controller and Node services.",
        epilog="Every flag falls back to the environment variable named in its help.",
    )

    def flag(name: str, var: str, default: object, help_: str, **kw: object) -> None:
        p.add_argument(name, default=env.get(var, default), help=f"{help_} (env {var})", **kw)  # type: ignore[arg-type]

    flag("--mode", "CSI_MODE", d.mode, "services to serve", choices=["controller", "node", "all"])
    flag("--endpoint", "CSI_ENDPOINT", d.endpoint, "unix socket to listen on")
    flag("--node-id", "CSI_NODE_ID", env.get("KUBE_NODE_NAME", ""), "this node's id (default: hostname)")
    flag("--backend", "CSI_BACKEND", d.backend, "volume backend", choices=["local", "lightningstor"])
    flag("--state-dir", "CSI_STATE_DIR", str(d.state_dir), "local backend state directory")
    flag("--lightningstor-endpoint", "LIGHTNINGSTOR_ENDPOINT", "", "VolumeService gRPC address")
    add_flags(p, env)
    flag("--metrics-address", "CSI_METRICS_ADDRESS", "", "host:port for /metrics (empty: off)")
    flag(
        "--max-volumes-per-node",
        "CSI_MAX_VOLUMES_PER_NODE",
        "auto",
        "volumes one node may have published; 0 = unlimited, auto = the loop devices the node can hold",
    )
    flag("--qos-cgroup", "CSI_QOS_CGROUP", d.qos_cgroup, "cgroup dir for volume I/O limits (auto: detect)")
    flag(
        "--capacity-bytes", "CSI_CAPACITY_BYTES", 0, "local backend capacity (0 = filesystem size)", type=int
    )
    flag(
        "--default-fs-type",
        "CSI_DEFAULT_FS_TYPE",
        d.default_fs_type,
        "fs for volumes that name none",
        choices=["ext4", "xfs", "auto"],
    )
    flag("--workers", "CSI_WORKERS", d.workers, "gRPC worker threads", type=int)
    flag("--log-level", "CSI_LOG_LEVEL", d.log_level, "debug|info|warning|error")
    return p


def _count_or_auto(raw: str | int) -> int | None:
    if raw == "auto":
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise ValueError(f"--max-volumes-per-node must be an integer or auto, got {raw!r}") from e


def split_host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)
