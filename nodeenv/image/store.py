"""Where `make image` keeps the suite's image, and the podman that reads it.

One store, under the repository: `build/podman/` (env K8SHOST_IMAGE_STORE to move it) holds
podman's own configuration (`containers.conf`, `storage.conf`, named by podman's variables
CONTAINERS_CONF and CONTAINERS_STORAGE_CONF), its overlay storage (`storage/`) and run root
(`run/`). The system's podman store is never touched. Anything that starts containers from the
image (the image tests, the kubelet-like runner, an admin pushing it) runs podman with `env()`:

    eval "$(python -m nodeenv.image env)"; podman images

Two settings are this machine's, as for the CNI tests' podman (nodeenv/podman_runtime.py):
runc runs the containers (crun 1.8 refuses the hybrid cgroup layout), and, without
CAP_SYS_RESOURCE, podman's default ulimits (nofile 1048576) cannot be set, so the store's
containers.conf asks for limits this process may set. Its containers get no network unless they
ask (`netns = "none"`), the build's RUN steps share the host's (`--network=host`), and CNI network
files stay in the store: nothing here creates a bridge, an iptables rule or a file in /etc/cni.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nodeenv.podman_runtime import engine_conf

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STORE = ROOT / "build" / "podman"
CAP_SYS_RESOURCE = 24


def has_cap_sys_resource(status: str | None = None) -> bool:
    """Whether this process may raise resource limits (CapEff of /proc/self/status)."""
    text = status if status is not None else Path("/proc/self/status").read_text()
    eff = next(line.split()[1] for line in text.splitlines() if line.startswith("CapEff:"))
    return bool(int(eff, 16) >> CAP_SYS_RESOURCE & 1)


def settable_ulimits() -> list[str]:
    """podman's `default_ulimits` a process without CAP_SYS_RESOURCE can apply: open files at its own
    hard limit; processes at 4096, as the CNI tests' podman (runc is refused this process's own
    nproc hard limit here, while 4096 passes)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = "-1:-1" if hard == resource.RLIM_INFINITY else f"{hard}:{hard}"
    return [f"nofile={nofile}", "nproc=4096:4096"]


def containers_conf(base: Path, ulimits: list[str] | None) -> str:
    limits = "" if ulimits is None else f"default_ulimits = {json.dumps(ulimits)}\n"
    return f"""# written by nodeenv/image/store.py for `make image`
[containers]
# no network unless a container asks for one (the build's RUN steps use the host's, --network=host)
netns = "none"
{limits}
[network]
network_backend = "cni"
network_config_dir = "{base}/cni"

{engine_conf(base)}"""


def storage_conf(base: Path) -> str:
    return f"""# written by nodeenv/image/store.py for `make image`
[storage]
driver = "overlay"
graphroot = "{base}/storage"
runroot = "{base}/run"
"""


class PodmanError(RuntimeError):
    """A podman command failed; the message holds the command and podman's stderr."""


@dataclass(frozen=True)
class ImageStore:
    base: Path = DEFAULT_STORE

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ImageStore:
        return cls(Path(env.get("K8SHOST_IMAGE_STORE", DEFAULT_STORE)).resolve())

    def ensure(self) -> None:
        """Create the store's directories and (re)write its configuration; idempotent."""
        for sub in ("tmp", "cni"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        ulimits = None if has_cap_sys_resource() else settable_ulimits()
        for name, text in (
            ("containers.conf", containers_conf(self.base, ulimits)),
            ("storage.conf", storage_conf(self.base)),
        ):
            path = self.base / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)

    def env(self) -> dict[str, str]:
        """podman's variables naming this store's configuration (add to a podman's environment)."""
        return {
            "CONTAINERS_CONF": str(self.base / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.base / "storage.conf"),
        }

    def command(self, *args: str) -> list[str]:
        return ["podman", *args]

    def run_env(self) -> dict[str, str]:
        return {**os.environ, **self.env()}

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120, stdin: IO[bytes] | None = None
    ) -> str:
        proc = subprocess.run(self.command(*args), env=self.run_env(), stdin=stdin, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip
        if check and proc.returncode:
            raise PodmanError(f"podman {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def exists(self, image: str) -> bool:
        proc = subprocess.run(self.command("image", "exists", image), env=self.run_env(), timeout=60)
        return proc.returncode == 0

    def size(self, image: str) -> int:
        """The image's size in bytes, as podman counts it (all its layers, uncompressed)."""
        return int(self("image", "inspect", "--format", "{{.Size}}", image))
