"""A node environment: settings, the private run dir, and the components started in it.

`Node.up()` starts every component in order and writes `<run>/node.env`; `Node.down()`
stops exactly the daemons it recorded (by PID, newest first), lets each component undo
what it created outside the run dir (bridges, installed files), and removes the run dir.
Everything works in the run dir through its short alias (`node.run_dir`, nodeenv/runtime_dir.py),
so the unix sockets under it fit whatever the checkout's depth.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

from nodeenv.daemons import DaemonTable, is_alive
from nodeenv.evidence import Fault, find_faults, keep_evidence
from nodeenv.runtime_dir import (
    RUNTIME_DIR,
    link_run_dir,
    make_run_dir,
    remove_run_dir,
    runtime_dir_from_env,
    short_path,
)

log = logging.getLogger(__name__)

DEFAULT_RUN_DIR = Path(__file__).resolve().parent.parent / ".run"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSettings:
    run_dir: Path = DEFAULT_RUN_DIR
    bridge: str = "br-int"
    """The OVN integration bridge (userspace datapath)."""
    system_id: str = "k8shost-node"
    """The OVN chassis name of this node."""
    encap_ip: str = "127.0.0.1"
    install_root: Path = Path("/")
    """Where node-up installs the CNI executable and conflist (opt/cni/bin, etc/cni/net.d)."""
    ovn_central: str = "standalone"
    """"standalone" (one NB, one SB, one northd) or "raft" (3-member NB and SB clusters, two
    northd active/standby); see nodeenv/ovn_central.py."""
    netns: str = ""
    """The network namespace this node's daemons run in ("": this one); a cluster node's own
    (nodeenv/cluster). Everything the node creates in the kernel goes away with it."""
    runtime_dir: Path = RUNTIME_DIR
    """Where the run dir's short alias is made (nodeenv/runtime_dir.py)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> NodeSettings:
        d = cls()
        return cls(
            run_dir=Path(env.get("K8SHOST_RUN_DIR", d.run_dir)),
            bridge=env.get("K8SHOST_BRIDGE", d.bridge),
            system_id=env.get("K8SHOST_SYSTEM_ID", d.system_id),
            encap_ip=env.get("K8SHOST_ENCAP_IP", d.encap_ip),
            install_root=Path(env.get("K8SHOST_INSTALL_ROOT", d.install_root)),
            ovn_central=env.get("K8SHOST_OVN_CENTRAL", d.ovn_central),
            runtime_dir=runtime_dir_from_env(env),
        )


class Component(Protocol):
    """Something node-up starts. `start` returns the endpoints it adds to node.env."""

    name: str

    def start(self, node: Node) -> dict[str, str]: ...

    def cleanup(self, node: Node) -> None:
        """Undo what `start` created outside the run dir; called after daemons stopped."""


@dataclass
class Node:
    settings: NodeSettings
    components: Sequence[Component]
    endpoints: dict[str, str] = field(default_factory=dict)
    evidence: Path | None = None
    """Where the evidence of a dead or wedged daemon was kept (nodeenv.evidence), once one was."""
    faults: list[Fault] = field(default_factory=list)

    @cached_property
    def run_dir(self) -> Path:
        """The run dir by its short alias: the path every component is given."""
        return short_path(self.settings.run_dir, self.settings.runtime_dir)

    @property
    def env_file(self) -> Path:
        return self.run_dir / "node.env"

    @property
    def daemons(self) -> DaemonTable:
        return DaemonTable(self.run_dir / "daemons.json")

    def path(self, *parts: str) -> Path:
        p = self.run_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def process_env(self) -> dict[str, str]:
        """The environment for daemons and tools of this node: os.environ plus node.env."""
        return {**os.environ, **self.endpoints}

    def is_up(self) -> bool:
        records = self.daemons.load()
        return self.env_file.exists() and bool(records) and all(is_alive(r) for r in records)

    def up(self) -> dict[str, str]:
        if self.is_up():
            self.endpoints = read_env_file(self.env_file)
            log.info("node environment already up in %s", self.run_dir)
            return self.endpoints
        if self.settings.run_dir.exists():
            log.info("stale node environment in %s; cleaning it first", self.settings.run_dir)
            self.down()
        make_run_dir(self.settings.run_dir, self.settings.runtime_dir)
        self.endpoints = {"K8SHOST_RUN_DIR": str(self.run_dir)}
        if self.settings.netns:
            self.endpoints["K8SHOST_NETNS"] = self.settings.netns
        try:
            for component in self.components:
                self.endpoints.update(component.start(self))
                write_env_file(self.env_file.with_suffix(".partial"), self.endpoints)
        except BaseException:
            log.error("node-up failed; stopping what was started")
            self.report_logs()
            self.down()
            raise
        write_env_file(self.env_file, self.endpoints)
        self.env_file.with_suffix(".partial").unlink(missing_ok=True)
        return self.endpoints

    def report_logs(self, lines: int = 15) -> None:
        """Log the tail of every daemon log in the run dir (it is removed by down())."""
        for logfile in sorted(self.run_dir.rglob("*.log")):
            tail = logfile.read_text(errors="replace").splitlines()[-lines:]
            if tail:
                log.error("last lines of %s:\n  %s", logfile.relative_to(self.run_dir), "\n  ".join(tail))

    def check(self, probe: tuple[str, ...] | None = None) -> list[Fault]:
        """Dead or wedged daemons; the first time any are found, their evidence is kept."""
        found = find_faults(self.daemons.load(), self.run_dir / "ovs", probe)
        if found:
            self.keep_evidence(found)
        return found

    def keep_evidence(self, found: list[Fault]) -> Path:
        """Copy logs, daemon state and cores out of the run dir (again into the same place)."""
        self.faults = found
        self.evidence = keep_evidence(self.run_dir, self.daemons.load(), found, self.evidence)
        return self.evidence

    def down(self) -> list[str]:
        link_run_dir(self.settings.run_dir, self.settings.runtime_dir)  # lost with /run (a reboot)
        if self.env_file.exists():
            self.endpoints = read_env_file(self.env_file)
        elif self.env_file.with_suffix(".partial").exists():
            self.endpoints = read_env_file(self.env_file.with_suffix(".partial"))
        if self.run_dir.exists():
            self.check()  # before stopping: a daemon dead now is evidence, its logs go with the run dir
        stopped = self.daemons.stop_all()
        for component in reversed(self.components):
            try:
                component.cleanup(self)
            except Exception:
                log.exception("cleanup of %s failed", component.name)
        remove_run_dir(self.settings.run_dir, self.settings.runtime_dir)
        return stopped


def write_env_file(path: Path, values: Mapping[str, str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items()))
    tmp.replace(path)


def read_env_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            out[key] = shlex.split(value)[0] if value else ""
    return out
