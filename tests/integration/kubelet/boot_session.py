"""One `boot --nodes 3` (`booted_cluster` below): the run dir, the boot's output, and kubectl with the
admin kubeconfig; removed with `down` at the end, leaving no namespace behind. conftest.py's package
fixture `booted` is the one the boot test modules share (prefix PREFIX); `cli` runs the boot's
command line (`python -m nodeenv.kubelet`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import require_ovn

PREFIX = "k8shkt"
"""The shared boot's network namespaces: k8shkt-node1..3 (a second boot of its own takes another)."""


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodeenv.kubelet", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@dataclass(frozen=True)
class Booted:
    out: str
    run_dir: Path

    def run(
        self, *args: str, stdin: str | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        kubeconfig = self.run_dir / "kubeapi" / "admin.kubeconfig"
        return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        proc = self.run(*args, stdin=stdin)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))


@contextmanager
def booted_cluster(prefix: str, nodes: int = 3) -> Iterator[Booted]:
    require_ovn()
    tmp = Path(tempfile.mkdtemp(prefix="bn-", dir="/tmp"))
    flags = ("--run-dir", str(tmp / "b"), "--netns-prefix", prefix)
    try:
        proc = cli("boot", *flags, "--nodes", str(nodes), "--api-port", "0", "--timeout", "300", timeout=420)
        assert proc.returncode == 0, f"boot exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        yield Booted(proc.stdout, tmp / "b")
    finally:
        down = cli("down", *flags, timeout=300)
        shutil.rmtree(tmp, ignore_errors=True)
    assert down.returncode == 0, down.stdout + down.stderr
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{prefix}-" not in left, left
