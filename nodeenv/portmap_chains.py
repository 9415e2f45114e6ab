"""The shared nat chains Debian's portmap plugin creates on first use and never removes
(CNI-HOSTPORT-DNAT, -SETMARK, -MASQ and the jumps to them): whoever made them appear removes them."""

from __future__ import annotations

import shlex
import subprocess


def nat_chains() -> set[str]:
    out = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    return {line[1:].split()[0] for line in out.splitlines() if line.startswith(":CNI-")}


def remove_new_chains(before: set[str]) -> None:
    """Remove the CNI- chains that are not in `before`, and the rules jumping to them."""
    new = nat_chains() - before
    out = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        rule = shlex.split(line[3:]) if line.startswith("-A ") else []
        if rule and rule[0] not in new and any(c in rule for c in new):
            subprocess.run(["iptables", "-t", "nat", "-D", *rule], check=True)
    for op in ("-F", "-X"):
        for chain in new:
            subprocess.run(["iptables", "-t", "nat", op, chain], check=True)
