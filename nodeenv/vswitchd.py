"""Which ovs-vswitchd the node environment runs, and the Open_vSwitch schema that goes with it.

Debian 12's ovs-vswitchd 3.1.0 aborts in its userspace conntrack under TCP connection churn
through an OVN load balancer (docs/troubleshooting.md; fixed upstream in 3.1.3), so
`scripts/build-ovs.sh` (run by `make test`, `make node-up`, `make sandbox`, `make bench`)
builds 3.5.0 from Debian 13's source into build/ovs-3.5.0/. In order:

1. `K8SHOST_OVS_VSWITCHD` in the node's process environment: that binary (for example
   Debian's /usr/sbin/ovs-vswitchd, to reproduce the crash);
2. the built build/ovs-3.5.0/ovs-vswitchd;
3. Debian's /usr/sbin/ovs-vswitchd, with a warning.

The schema is the `vswitch.ovsschema` beside the binary, else Debian's. Everything else of
OVS (ovsdb-server, ovs-vsctl, ovs-appctl) stays Debian's 3.1: they speak OVSDB/unixctl JSON-RPC
with the newer daemon and schema.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError

log = logging.getLogger(__name__)

ENV_VAR = "K8SHOST_OVS_VSWITCHD"
BUILT_DIR = Path(__file__).resolve().parent.parent / "build" / "ovs-3.5.0"
DEBIAN_VSWITCHD = Path("/usr/sbin/ovs-vswitchd")
DEBIAN_SCHEMA = ovn_tree.share("openvswitch/vswitch.ovsschema")  # Debian 12's, or K8SHOST_OVN_TREE's


@dataclass(frozen=True, slots=True, kw_only=True)
class Vswitchd:
    binary: Path
    schema: Path
    version: str
    """As `ovs-vswitchd --version` says, e.g. "3.5.0-k8shost" or "3.1.0"."""

    def endpoints(self) -> dict[str, str]:
        """What node.env records about it."""
        return {
            "OVS_VSWITCHD": str(self.binary),
            "OVS_VSWITCHD_VERSION": self.version,
            "OVS_SCHEMA": str(self.schema),
        }


def choose_vswitchd(env: Mapping[str, str]) -> Vswitchd:
    """The ovs-vswitchd to run (see module doc); fails clearly on a bad K8SHOST_OVS_VSWITCHD."""
    chosen = env.get(ENV_VAR, "")
    if chosen:
        binary = Path(chosen)
        if not os.access(binary, os.X_OK):
            raise DaemonError(f"{ENV_VAR}={chosen}: not an executable file")
    elif (BUILT_DIR / "ovs-vswitchd").exists():
        binary = BUILT_DIR / "ovs-vswitchd"
    else:
        binary = DEBIAN_VSWITCHD
        log.warning(
            "no %s (scripts/build-ovs.sh builds it): running Debian's ovs-vswitchd, whose userspace "
            "conntrack aborts under TCP connection churn through a load balancer",
            BUILT_DIR / "ovs-vswitchd",
        )
    beside = binary.parent / "vswitch.ovsschema"
    return Vswitchd(
        binary=binary, schema=beside if beside.exists() else DEBIAN_SCHEMA, version=_version(binary)
    )


def _version(binary: Path) -> str:
    """ "ovs-vswitchd (Open vSwitch) 3.5.0-k8shost" -> "3.5.0-k8shost"."""
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    if proc.returncode != 0 or "Open vSwitch" not in first:
        raise DaemonError(f"{binary} --version: not an ovs-vswitchd ({proc.stderr.strip() or first!r})")
    return first.split()[-1]
