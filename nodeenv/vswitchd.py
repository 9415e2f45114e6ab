"""The ovs-vswitchd the node environment runs, and the Open_vSwitch schema that goes with it: the
tree's (nodeenv/ovn_tree.py, build/ovn-trixie: Debian 13's 3.5.0, as are the tree's ovsdb-server,
ovs-vsctl and ovs-appctl).

Debian 12's 3.1.0 aborted in its userspace conntrack under TCP connection churn through an OVN
load balancer (docs/troubleshooting.md; fixed upstream in 3.1.3); 3.5.0 does not.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError

SCHEMA = "openvswitch/vswitch.ovsschema"  # under the tree's /usr/share


@dataclass(frozen=True, slots=True, kw_only=True)
class Vswitchd:
    binary: Path
    schema: Path
    version: str
    """As `ovs-vswitchd --version` says, e.g. "3.5.0"."""

    def endpoints(self) -> dict[str, str]:
        """What node.env records about it."""
        return {
            "OVS_VSWITCHD": str(self.binary),
            "OVS_VSWITCHD_VERSION": self.version,
            "OVS_SCHEMA": str(self.schema),
        }


def choose_vswitchd() -> Vswitchd:
    """The tree's ovs-vswitchd and schema; a tree not made fails naming `make ovs`."""
    why = ovn_tree.missing()
    if why:
        raise DaemonError(why)
    binary = ovn_tree.bin_dir() / "ovs-vswitchd"
    return Vswitchd(binary=binary, schema=ovn_tree.share(SCHEMA), version=_version(binary))


def _version(binary: Path) -> str:
    """ "ovs-vswitchd (Open vSwitch) 3.5.0" -> "3.5.0"."""
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    if proc.returncode != 0 or "Open vSwitch" not in first:
        raise DaemonError(f"{binary} --version: not an ovs-vswitchd ({proc.stderr.strip() or first!r})")
    return first.split()[-1]
