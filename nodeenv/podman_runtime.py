"""Debian's podman 4.3 with its CNI backend, confined to a private directory, as a real caller of
the installed `prismnet` executable and conflist (used by the tests, the bench and the sandbox).

Everything podman reads is its own configuration, written here and named by podman's own
variables (`CONTAINERS_CONF`, `CONTAINERS_STORAGE_CONF`): the CNI backend with the plugin
directories and the conflist directory node-up installed into, vfs storage, runroot, tmp dir
and a cgroup parent of our own. The environment podman (and its conmon and cleanup
processes) runs with holds nothing else: no PRISMNET variable, so the executable finds the
agent only through the conflist's `agentSocket`.

Two settings are this machine's, not ours: the process lacks CAP_SYS_RESOURCE, so podman's
default ulimits (nofile raised to 1048576) cannot be applied and lower ones are set; crun 1.8
refuses the hybrid cgroup v1/v2 layout here, so runc runs the containers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

IMAGE = "localhost/k8shost-busybox:1"
APPLETS = ("sh", "sleep", "ping", "ip", "httpd", "true", "cat", "wget")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def missing_prerequisites() -> list[str]:
    missing = [p for p in ("podman", "runc", "conmon") if not shutil.which(p)]
    return missing + ([] if Path("/bin/busybox").exists() else ["busybox-static"])


def engine_conf(base: Path) -> str:
    """containers.conf's [engine] table for a private store under `base`: runc (crun 1.8 refuses
    this VM's hybrid cgroups), cgroupfs, no journald, every scratch directory in the store."""
    return f"""[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "none"
tmp_dir = "{base}/libpod"
image_copy_tmp_dir = "{base}/tmp"
volume_path = "{base}/volumes"
"""


def containers_conf(base: Path, install_root: Path) -> str:
    plugin_dirs = [str(install_root / "opt/cni/bin"), "/opt/cni/bin", "/usr/lib/cni"]
    return f"""[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
cgroups = "no-conmon"

{engine_conf(base)}
[network]
network_backend = "cni"
cni_plugin_dirs = {plugin_dirs!r}
network_config_dir = "{install_root / "etc/cni/net.d"}"
""".replace("'", '"')


def storage_conf(base: Path) -> str:
    return f"""[storage]
driver = "vfs"
graphroot = "{base}/storage"
runroot = "{base}/run"
"""


@dataclass
class Podman:
    base: Path
    cgroup_parent: str
    stray_lock: Path | None = None
    """podman's CNI backend makes `cni.lock` in the conflist directory; removed if it made it."""
    netns: str = ""
    """A cluster node's network namespace podman runs in (its runtime's), entered with nsenter so
    podman keeps this mount namespace (where it mounts its containers' network namespaces)."""

    @property
    def env(self) -> dict[str, str]:
        """All podman gets: its own config variables, PATH and a private HOME."""
        return {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(self.base),
            "CONTAINERS_CONF": str(self.base / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.base / "storage.conf"),
        }

    def __call__(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        proc = subprocess.run(
            [*self._enter(), "podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode:
            raise RuntimeError(f"podman {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def _enter(self) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.netns}"] if self.netns else []

    def start(self, name: str, *run_args: str, command: tuple[str, ...] = ("sleep", "600")) -> str:
        """`podman run -d` on our network; returns the container id."""
        placement = ["--network", "prismnet", "--cgroup-parent", self.cgroup_parent]
        return self("run", "-d", "--name", name, *placement, *run_args, IMAGE, *command)

    def inspect(self, name: str, template: str) -> str:
        return self("inspect", "--format", template, name)

    def build_image(self) -> None:
        """A busybox image from Debian's busybox-static (no registry is reachable here)."""
        rootfs = self.base / "rootfs"
        (rootfs / "bin").mkdir(parents=True)
        shutil.copy2("/bin/busybox", rootfs / "bin" / "busybox")
        for applet in APPLETS:
            (rootfs / "bin" / applet).symlink_to("busybox")
        (rootfs / "www").mkdir()
        (rootfs / "www" / "index.html").write_text("hello from a podman container\n")
        tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True).stdout
        argv = [*self._enter(), "podman", "import", "-", IMAGE]
        proc = subprocess.run(argv, input=tar, env=self.env, capture_output=True)
        if proc.returncode:
            raise RuntimeError(f"podman import: {proc.stderr.decode()}")

    def leftovers(self) -> list[str]:
        """What this podman left: containers, images, mounts, its cgroups, its lock file."""
        # read from storage, not asked of podman: any podman command re-creates its cni.lock
        left = []
        for kind in ("containers", "images"):
            index = self.base / "storage" / f"vfs-{kind}" / f"{kind}.json"
            left += [f"{kind} {c['id']}" for c in json.loads(index.read_text())] if index.exists() else []
        mounts, real = Path("/proc/self/mounts").read_text(), os.path.realpath(self.base)  # the table's paths
        left += [f"mount {line.split()[1]}" for line in mounts.splitlines() if real in line]
        left += [str(p) for p in CGROUP_ROOT.glob(f"*/{self.cgroup_parent.strip('/')}") if p.exists()]
        left += [str(self.stray_lock)] if self.stray_lock and self.stray_lock.exists() else []
        return left

    def remove_all(self) -> None:
        self("rm", "-af", "-t", "0", check=False)
        self("rmi", "-af", check=False)
        if self.stray_lock is not None:
            self.stray_lock.unlink(missing_ok=True)
        for parent in CGROUP_ROOT.glob(f"*/{self.cgroup_parent.strip('/')}"):
            for child in sorted((p for p in parent.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                child.rmdir()
            parent.rmdir()


def make_podman(base: Path, install_root: Path, cgroup_parent: str, netns: str = "") -> Podman:
    """A podman whose config, storage and state live in `base` (created; must not exist), run in
    the network namespace `netns` ("": this one)."""
    (base / "tmp").mkdir(parents=True)
    (base / "containers.conf").write_text(containers_conf(base, install_root))
    (base / "storage.conf").write_text(storage_conf(base))
    lock = install_root / "etc/cni/net.d/cni.lock"
    return Podman(base, cgroup_parent, None if lock.exists() else lock, netns)
