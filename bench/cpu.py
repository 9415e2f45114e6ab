"""CPU time per process over a measured stretch: who pays for a pod, in milliseconds of CPU.

Reads /proc/<pid>/stat (user + system ticks) of the processes whose command line names one
of `daemons`, and getrusage(RUSAGE_CHILDREN) of this process for the programs it ran and
waited for (the CNI executables: the shim or the reference plugins, with their own children).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

TICK = 1 / os.sysconf("SC_CLK_TCK")
NODE_DAEMONS = {
    "ovs-vswitchd": "ovs-vswitchd",
    "ovsdb-server": "ovsdb-server (OVS, NB, SB)",
    "ovn-northd": "ovn-northd",
    "ovn-controller": "ovn-controller",
    "cni.daemon.main": "prismnet-agent",
}
EXECUTABLES = "CNI executables run by the harness"
HARNESS = "harness (this process)"


@dataclass(frozen=True)
class Sample:
    per_process: dict[int, tuple[str, float]]
    children: float
    own: float


def _label(cmdline: list[str], daemons: dict[str, str], words: int | None) -> str | None:
    text = " ".join(cmdline[:words])
    return next((label for key, label in daemons.items() if key in text), None)


def sample(daemons: dict[str, str] = NODE_DAEMONS, words: int | None = 3) -> Sample:
    """`daemons` maps command-line fragments to labels, matched in the first `words` words of each
    process's command line (None: the whole of it)."""
    out: dict[int, tuple[str, float]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = [w.decode(errors="replace") for w in f.read().split(b"\0")]
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        label = _label(cmdline, daemons, words)
        if label:
            out[int(pid)] = (label, (int(fields[11]) + int(fields[12])) * TICK)
    kids, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return Sample(out, kids.ru_utime + kids.ru_stime, own.ru_utime + own.ru_stime)


def per_pod_ms(before: Sample, after: Sample, pods: int) -> dict[str, float]:
    """CPU milliseconds per pod by label (processes that lived through both samples)."""
    totals: dict[str, float] = {}
    for pid, (label, cpu) in after.per_process.items():
        if pid in before.per_process:
            totals[label] = totals.get(label, 0.0) + cpu - before.per_process[pid][1]
    totals[EXECUTABLES] = after.children - before.children
    totals[HARNESS] = after.own - before.own
    return {k: v * 1000 / pods for k, v in totals.items()}
