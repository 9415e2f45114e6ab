"""The netpol controller's own flags (the machinery reads the common ones), each with an env fallback."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self

from controllers.netpol.translate import Priorities
from ovnaccess import tls
from ovnaccess.tls import OvnTls

PREFIX = "NETPOL_"


@dataclass(frozen=True, slots=True, kw_only=True)
class NetpolSettings:
    ovn_nb_db: str = "unix:/run/ovn/ovnnb_db.sock"
    """The OVN northbound database the controller writes (cluster-wide)."""
    priorities: Priorities = field(default_factory=Priorities)
    ovn_tls: OvnTls | None = None
    """The controller's key, certificate and the OVN CA for `ssl:` remotes."""
    acl_log_rate: int = 20
    """Verdict-log packets per second each node's ovn-controller gets per logged ACL (the meter)."""

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Self:
        allow, deny = int(a.allow_priority), int(a.deny_priority)
        if not 0 <= deny < allow <= 32767:
            raise ValueError("--deny-priority must be below --allow-priority, both in 0-32767")
        rate = int(a.acl_log_rate)
        if not 1 <= rate <= 4294967295:
            raise ValueError("--acl-log-rate must be a positive number of packets per second")
        return cls(ovn_nb_db=a.ovn_nb_db, priorities=Priorities(allow=allow, deny=deny),
                   ovn_tls=OvnTls.from_args(a), acl_log_rate=rate)  # fmt: skip


def add_arguments(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    d = NetpolSettings()

    def add(flag: str, var: str, default: object, help: str) -> None:
        p.add_argument(flag, default=env.get(PREFIX + var, str(default)),
                       help=f"{help} (env {PREFIX}{var}; default {default!r})")  # fmt: skip

    add(
        "--ovn-nb-db", "OVN_NB_DB", d.ovn_nb_db, "OVN northbound database (unix:PATH, tcp:HOST:PORT, ssl:...)"
    )
    tls.add_arguments(p, env)
    add("--allow-priority", "ALLOW_PRIORITY", d.priorities.allow, "priority of the policies' allow ACLs")
    add("--deny-priority", "DENY_PRIORITY", d.priorities.deny, "priority of the default-deny drop ACLs")
    add("--acl-log-rate", "ACL_LOG_RATE", d.acl_log_rate,
        "verdict-log packets/s per node and logged ACL (OVN meter acl-logging)")  # fmt: skip
