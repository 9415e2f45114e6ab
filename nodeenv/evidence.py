"""Keeping the evidence when a node environment finds one of its daemons dead or wedged (issue 20).

`find_faults` checks every daemon the environment recorded: a process that is gone (or a zombie)
is *dead*; an OVS/OVN daemon that does not answer `ovs-appctl version` on its control socket within
a few seconds is *wedged*. `keep_evidence` copies what explains it out of the run dir (which
`down()` removes) into `$K8SHOST_EVIDENCE_DIR` (default /tmp/k8shost-evidence)/<time>-<chassis>/:
every log of the run dir (ovs-vswitchd.log, ovn-controller.log, ovn-northd.log, the ovsdb-server
logs, our daemons' stderr logs), from each OVS/OVN daemon still answering `coverage/show` and
`memory/show` (ovs-vswitchd also `dpctl/dump-conntrack`, `dpif/show`, `upcall/show`), every core
file with a gdb backtrace of all its threads, and FAULTS.txt saying which daemon and why.

Core files: the OVS/OVN daemons are started with RLIMIT_CORE unlimited (`prlimit`, in the child
only) and `--no-chdir` in the run dir's ovs/, so a crash dumps `core` there whenever the machine's
kernel.core_pattern is a relative name (Debian's default is "core"). core_pattern is machine-wide
and is read, never written; when it names an absolute path or pipes to a handler
(systemd-coredump, apport), FAULTS.txt says where the core went instead.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from nodeenv.daemons import DaemonRecord, is_alive

log = logging.getLogger(__name__)

EVIDENCE_ROOT = Path(os.environ.get("K8SHOST_EVIDENCE_DIR", "/tmp/k8shost-evidence"))
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
PROBE_TIMEOUT = 5
# what each OVS/OVN daemon is asked for, beside `version` (the liveness probe)
COLLECT = {
    "ovs-vswitchd": ("dpctl/dump-conntrack", "coverage/show", "memory/show", "dpif/show", "upcall/show"),
    "ovn-controller": ("coverage/show", "memory/show", "ct-zone-list"),
    "ovn-northd": ("coverage/show", "memory/show"),
    "ovsdb-server": ("coverage/show", "memory/show"),
}


@dataclass(frozen=True, slots=True)
class Fault:
    daemon: str
    pid: int
    state: str  # "dead" or "wedged"
    detail: str

    def __str__(self) -> str:
        return f"{self.daemon} (pid {self.pid}) {self.state}: {self.detail}"


def control_socket(ovs_dir: Path, rec: DaemonRecord) -> Path | None:
    """The unixctl socket of an OVS/OVN daemon of the environment (None: not an OVS/OVN daemon)."""
    if rec.name.startswith("ovsdb-server-"):
        return ovs_dir / f"ovsdb-{rec.name.removeprefix('ovsdb-server-')}.ctl"
    if rec.name in ("ovs-vswitchd", "ovn-northd"):
        return ovs_dir / f"{rec.name}.ctl"
    if rec.name == "ovn-controller":  # OVN 23.03 has no --unixctl for it: <rundir>/<name>.<pid>.ctl
        return ovs_dir / f"ovn-controller.{rec.pid}.ctl"
    return None


def appctl(ctl: Path, *command: str, timeout: int | None = None) -> tuple[bool, str]:
    """(answered, output) of one `ovs-appctl` command; a timeout is (False, why)."""
    timeout = timeout or PROBE_TIMEOUT
    argv = ["ovs-appctl", f"--timeout={timeout}", "-t", str(ctl), *command]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 2)
    except subprocess.TimeoutExpired:
        return False, f"no answer to {' '.join(command)} within {timeout}s"
    if "Alarm clock" in proc.stderr:  # ovs-appctl's own --timeout fired
        return False, f"no answer to {' '.join(command)} within {timeout}s"
    if proc.returncode != 0:
        return False, proc.stderr.strip() or f"ovs-appctl exited {proc.returncode}"
    return True, proc.stdout


def find_faults(
    records: list[DaemonRecord], ovs_dir: Path, probe: tuple[str, ...] | None = None
) -> list[Fault]:
    """Dead or wedged daemons among `records`; `probe`: names whose control socket is asked for
    `version` (None: every OVS/OVN daemon)."""
    out = []
    for rec in records:
        if not is_alive(rec):
            out.append(Fault(rec.name, rec.pid, "dead", "process gone: " + _last_words(ovs_dir, rec)))
            continue
        ctl = control_socket(ovs_dir, rec)
        if ctl is None or (probe is not None and rec.name not in probe):
            continue
        answered, text = appctl(ctl, "version")
        if not answered:
            out.append(Fault(rec.name, rec.pid, "wedged", text))
    return out


def _last_words(ovs_dir: Path, rec: DaemonRecord) -> str:
    """The last EMER/ERR line of the daemon's log, if it left one (an assertion, a fatal signal)."""
    name = f"ovsdb-{rec.name.removeprefix('ovsdb-server-')}" if rec.name.startswith("ovsdb") else rec.name
    logfile = ovs_dir / f"{name}.log"
    if not logfile.exists():
        return "no log line"
    lines = [ln for ln in logfile.read_text(errors="replace").splitlines() if "|EMER|" in ln or "|ERR|" in ln]
    return lines[-1] if lines else "no EMER/ERR line in its log"


def keep_evidence(
    run_dir: Path, records: list[DaemonRecord], found: list[Fault], into: Path | None = None
) -> Path:
    """Copy the evidence out of `run_dir` (into `into` again when given: later copies have more)."""
    dest = into or _new_dir(run_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for logfile in sorted(run_dir.rglob("*.log")):
        target = dest / "logs" / logfile.relative_to(run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(logfile, target)
    ovs_dir = run_dir / "ovs"
    for rec in records:
        ctl = control_socket(ovs_dir, rec)
        if ctl is not None and is_alive(rec):
            _collect(ctl, rec, dest)
    for core in _cores(run_dir):
        _keep_core(core, records, dest)
    cores = [c.read_text() for c in sorted(dest.glob("core-*.note"))]  # this call's and earlier ones
    notes = [str(f) for f in found] + [""] + cores + [core_pattern_note(bool(cores))]
    (dest / "FAULTS.txt").write_text("\n".join(notes) + "\n")
    log.error("daemon fault(s): %s; evidence kept in %s", "; ".join(map(str, found)), dest)
    return dest


def _new_dir(run_dir: Path) -> Path:
    chassis = run_dir.parent.name or "node"
    return EVIDENCE_ROOT / f"{time.strftime('%Y%m%d-%H%M%S')}-{chassis}-{os.getpid()}"


def _collect(ctl: Path, rec: DaemonRecord, dest: Path) -> None:
    kind = "ovsdb-server" if rec.name.startswith("ovsdb-server") else rec.name
    for command in COLLECT.get(kind, ()):
        answered, text = appctl(ctl, command)
        (dest / f"{rec.name}.{command.replace('/', '_')}.txt").write_text(text)
        if not answered:  # wedged: every further command would wait as long
            return


def _cores(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.rglob("core*") if p.is_file() and p.name.split(".")[0] == "core")


def _keep_core(core: Path, records: list[DaemonRecord], dest: Path) -> None:
    """Move the core next to the evidence, write `gdb` `thread apply all bt` of it and a note."""
    kept = dest / f"{core.name}-{core.stat().st_mtime_ns}"
    shutil.move(core, kept)
    exe = _core_exe(kept, records)
    note = kept.with_name(kept.name + ".note")
    if exe is None:
        note.write_text(f"{kept}: no executable of ours made it (generated by: {_generated_by(kept)})")
        return
    argv = ["gdb", "-batch", "-nx", "-ex", "info threads", "-ex", "thread apply all bt", exe, str(kept)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    bt = dest / f"{kept.name}.backtrace.txt"
    bt.write_text(proc.stdout + proc.stderr)
    note.write_text(f"{kept}: core of {exe}; backtrace in {bt}")


def _core_exe(core: Path, records: list[DaemonRecord]) -> str | None:
    """The executable of ours the core is of: the file the core maps by a daemon's name (the core's
    command line holds only its first 80 bytes: a binary in a deep checkout is cut short there), else
    the command line's first word."""
    generated, mapped = _core_info(core)
    names = {rec.exe for rec in records}
    for path in mapped:
        if Path(path).name in names and Path(path).exists():
            return path
    argv0 = generated.split(" ")[0]
    for rec in records:
        if argv0.endswith(rec.exe):  # started by path (nodeenv.vswitchd's choice) or by name
            return argv0 if Path(argv0).is_absolute() and Path(argv0).exists() else shutil.which(rec.exe)
    return None


def _generated_by(core: Path) -> str:
    """The command line gdb reads from the core ("Core was generated by `ovs-vswitchd unix:...'")."""
    return _core_info(core)[0]


def _core_info(core: Path) -> tuple[str, list[str]]:
    """The core's command line and the files it maps, in address order (gdb's `info proc mappings`)."""
    proc = subprocess.run(["gdb", "-batch", "-nx", "-c", str(core), "-ex", "info proc mappings"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    generated, mapped = "?", []
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("Core was generated by `"):
            generated = line.removeprefix("Core was generated by `").rstrip("'.")
        elif line.strip().startswith("0x") and len(line.split()) == 5 and line.split()[4].startswith("/"):
            mapped.append(line.split()[4])
    return generated, list(dict.fromkeys(mapped))


def core_pattern_note(found: bool) -> str:
    pattern = CORE_PATTERN.read_text().strip() if CORE_PATTERN.exists() else "?"
    where = (
        f"cores are piped to {pattern.split()[0][1:]} (coredumpctl / that handler's store)"
        if pattern.startswith("|")
        else f"cores go to {pattern}"
        if pattern.startswith("/")
        else "cores land in the daemon's working directory (the run dir's ovs/)"
    )
    return f"kernel.core_pattern = {pattern!r}: {where}; {'core(s) kept above' if found else 'no core found'}"
