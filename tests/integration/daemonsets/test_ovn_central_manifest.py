"""The ovn-central StatefulSet's containers run as the manifest says, three members at once, with no
capabilities at all (as its securityContext drops them): member 0 creates the NB and SB RAFT
clusters, members 1 and 2 join them through member 0's name (`ovn-central-0.ovn-central...`), every
probe passes, a write through one member's client listener is read through another's, ovn-northd
against all three goes active; and a standalone database left by the earlier single-member
Deployment seeds member 0's new cluster.

Each member runs the manifest's own script with the environment kubelet gives it (POD_NAME,
POD_NAMESPACE, POD_IP, CLUSTER_DOMAIN): its node address is a loopback address of its own
(127.0.0.11-13), its peers' names resolve through a hosts file bound over /etc/hosts in a private
mount namespace (the cluster DNS's answer for the headless Service), its paths move into a temp dir
and its ports are free ones of ours; the commands and probes are otherwise the manifest's. Its Secret
volumes (ovn-tls-<identity>) hold what `secret_args` puts in those Secrets, from a PKI that
nodeenv/ovn_pki.py's `manifest_pki` makes as `make boot` does; the checks reach the members over
ssl: with a client certificate of that PKI, as the NB's real clients do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.daemons import free_port
from nodeenv.ovn_pki import MANIFEST_IDENTITIES, OvnPki, manifest_pki, secret_args, secret_name
from ovnaccess.tls import OvnTls
from tests.conftest import require_ovn
from tests.unit.daemonsets.rendered import find
from tests.waiting import eventually

NO_CAPS = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]
HOSTS = 'mount --bind "$0" /etc/hosts && mount --bind "$0.resolv" /etc/resolv.conf && exec "$@"'
"""Run in `unshare -m`: the member's view of the cluster DNS (its hosts file; other names fail at
once, as the manifest's dnsConfig keeps lookups short), then its command."""
DOMAIN = "ovn-central.kube-system.svc.cluster.local"


def ip(i: int) -> str:
    return f"127.0.0.{11 + i}"


def secret_mounts() -> dict[str, tuple[str, int]]:
    """The StatefulSet's Secret volumes: mount path -> (the Secret's name, its files' mode)."""
    spec = find("StatefulSet", "ovn-central")["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
    mounts = [m for c in spec["containers"] for m in c.get("volumeMounts", []) if m["name"] in secrets]
    return {m["mountPath"]: (secrets[m["name"]]["secretName"], secrets[m["name"]].get("defaultMode", 0o644))
            for m in mounts}  # fmt: skip


def fill_secret(target: Path, pki: OvnPki, secret: str, mode: int) -> None:
    """What kubelet puts in a volume of Secret `secret`, as `secret_args` creates it from `pki`."""
    (identity,) = [i for i in MANIFEST_IDENTITIES if secret_name(i) == secret]
    for arg in secret_args(pki, identity):
        if arg.startswith("--from-file="):
            key, source = arg.removeprefix("--from-file=").split("=", 1)
            (target / key).write_bytes(Path(source).read_bytes())
            (target / key).chmod(mode)


class Member:
    """One pod of the StatefulSet: its own run/db/log dirs and Secret volumes, its containers as
    processes."""

    def __init__(self, i: int, tmp: Path, ports: dict[str, str], pki: OvnPki) -> None:
        self.i, self.ports, self.procs = i, ports, list[subprocess.Popen[bytes]]()
        names = {"/var/run/ovn": "run", "/var/lib/ovn": "db", "/var/log/ovn": "log", "etc": "etc"}
        secrets = secret_mounts()
        names |= {path: f"secret-{n}" for n, path in enumerate(secrets)}
        self.dirs = {d: tmp / f"m{i}" / name for d, name in names.items()}
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        for path, (secret, mode) in secrets.items():
            fill_secret(self.dirs[path], pki, secret, mode)
        self.hosts = tmp / f"m{i}" / "hosts"
        self.hosts.write_text("127.0.0.1 localhost\n")
        Path(f"{self.hosts}.resolv").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        run, log = str(self.dirs["/var/run/ovn"]), str(self.dirs["/var/log/ovn"])
        self.env = {**os.environ, "POD_NAME": f"ovn-central-{i}", "POD_NAMESPACE": "kube-system",
                    "POD_IP": ip(i), "CLUSTER_DOMAIN": "cluster.local", "OVN_RUNDIR": run, "OVS_RUNDIR": run,
                    "OVN_LOGDIR": log, "OVN_SYSCONFDIR": str(self.dirs["etc"])}  # fmt: skip

    def local(self, words: list[str]) -> list[str]:
        out = []
        for w in words:
            for path, d in self.dirs.items():
                if path.startswith("/"):
                    w = w.replace(path, str(d))
            out.append(self.ports.get(w, w))
        return out

    def peers(self, *others: int) -> None:
        self.hosts.write_text(
            "".join(f"{ip(j)} ovn-central-{j}.{DOMAIN}. ovn-central-{j}.{DOMAIN}\n" for j in others)
        )

    def start(self, c: dict[str, Any], env: dict[str, str] | None = None) -> None:
        argv = self.local([*c["command"], *(c.get("args") or [])])
        wrapped = ["unshare", "-m", "sh", "-c", HOSTS, str(self.hosts), *NO_CAPS, *argv]
        log = (self.dirs["/var/log/ovn"] / f"{c['name']}.out").open("ab")
        self.procs.append(subprocess.Popen(wrapped, env={**self.env, **(env or {})}, stdout=log, stderr=log))

    def probe_ok(self, probe: dict[str, Any]) -> bool:
        argv = self.local(probe["exec"]["command"])
        return subprocess.run(argv, env=self.env, capture_output=True, timeout=10).returncode == 0

    def output(self, name: str) -> str:
        return (self.dirs["/var/log/ovn"] / f"{name}.out").read_text()

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=10)
        for pidfile in self.dirs["/var/run/ovn"].glob("*.pid"):  # a daemon that outlived its shell
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)


@pytest.fixture
def members(tmp_path: Path) -> Iterator[tuple[list[Member], dict[str, str], OvnPki]]:
    require_ovn()
    ports = {p: str(free_port()) for p in ("6641", "6642", "6643", "6644")}
    pki = manifest_pki(tmp_path / "pki", [ip(i) for i in range(3)])
    made = [Member(i, tmp_path, ports, pki) for i in range(3)]
    try:
        yield made, ports, pki
    finally:
        for m in made:
            m.stop()


def containers() -> dict[str, dict[str, Any]]:
    sts = find("StatefulSet", "ovn-central")
    return {c["name"]: c for c in sts["spec"]["template"]["spec"]["containers"]}


def nbctl_run(
    ports: dict[str, str], member: int, tls: OvnTls, *args: str, timeout: int = 10
) -> subprocess.CompletedProcess[str]:
    """ovn-nbctl against `member`'s NB client listener over ssl:, presenting `tls`' certificate."""
    argv = ["ovn-nbctl", f"--db=ssl:{ip(member)}:{ports['6641']}", *tls.ctl_flags(), "--no-leader-only",
            f"--timeout={timeout}", *args]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True)


def nbctl(ports: dict[str, str], member: int, pki: OvnPki, *args: str) -> str:
    """As a PrismNET agent (one of the NB's clients, with its Secret's certificate)."""
    done = nbctl_run(ports, member, pki.files("prismnet-agent"), *args)
    assert done.returncode == 0, done.stderr
    return str(done.stdout).strip()


def test_three_members_form_the_clusters_without_capabilities(members: Any) -> None:
    ms, ports, pki = members
    cs = containers()
    assert set(cs) == {"nb", "sb", "northd", "exporter"}  # the RAFT exporter beside the members
    assert all(c["securityContext"]["capabilities"] == {"drop": ["ALL"]} for c in cs.values())
    for m in ms:
        if m.i:
            m.peers(0)  # the cluster DNS answers for member 0 once it runs
        for name in ("nb", "sb"):
            m.start(cs[name])
        if m.i == 0:
            eventually(lambda: all(ms[0].probe_ok(cs[n]["readinessProbe"]) for n in ("nb", "sb")),
                       lambda: f"member 0 a cluster member: {ms[0].output('nb')}")  # fmt: skip
    for m in ms:
        pending = [(n, k) for n in ("nb", "sb") for k in ("readinessProbe", "livenessProbe")]
        eventually(lambda m=m, p=pending: all(m.probe_ok(cs[n][k]) for n, k in p),  # type: ignore[misc]
                   lambda m=m: f"member {m.i}'s probes: {m.output('nb')}{m.output('sb')}")  # fmt: skip
    assert "creating the OVN_Northbound cluster" in ms[0].output("nb")
    joined = f"joining the OVN_Southbound cluster through ssl:{ip(0)}:{ports['6644']}"
    assert joined in ms[2].output("sb")
    ctl = str(ms[0].dirs["/var/run/ovn"] / "ovnnb_db.ctl")
    argv = ["ovs-appctl", "-t", ctl, "cluster/status", "OVN_Northbound"]
    status = subprocess.run(argv, capture_output=True, text=True).stdout
    assert all(f"ssl:{ip(i)}:{ports['6643']}" in status for i in range(3)), status
    # one cluster: written through member 2's client listener (a follower forwards it), read at member 0
    nbctl(ports, 2, pki, "ls-add", "written-via-2")
    assert "written-via-2" in nbctl(ports, 0, pki, "ls-list")
    # mutual TLS only: a client that trusts the members' CA but presents a certificate another CA
    # signed (under a name of a real client) is refused by the member
    other = OvnPki(ms[0].dirs["etc"].parent / "other-pki").issue("prismnet-agent")
    intruder = OvnTls(private_key=other.private_key, certificate=other.certificate, ca_cert=pki.ca_cert)
    refused = nbctl_run(ports, 0, intruder, "ls-list", timeout=3)
    assert refused.returncode != 0 and "written-via-2" not in refused.stdout, refused
    # ovn-northd against every member, as the manifest gives it k8shost-config's lists
    remotes = {k: ",".join(f"ssl:{ip(i)}:{ports[p]}" for i in range(3))
               for k, p in (("OVN_NB_DB", "6641"), ("OVN_SB_DB", "6642"))}  # fmt: skip
    northd = cs["northd"]
    argv = [w.replace("$(OVN_NB_DB)", remotes["OVN_NB_DB"]).replace("$(OVN_SB_DB)", remotes["OVN_SB_DB"])
            for w in northd["command"]]  # fmt: skip
    ms[1].start({**northd, "command": argv})
    eventually(lambda: ms[1].probe_ok(northd["readinessProbe"]) and ms[1].probe_ok(northd["livenessProbe"]),
               lambda: f"northd's probes: {ms[1].output('northd')}")  # fmt: skip

    def northd_status() -> str:
        argv = ["ovn-appctl", "-t", "ovn-northd", "status"]
        return subprocess.run(argv, env=ms[1].env, capture_output=True, text=True).stdout.strip()

    eventually(lambda: northd_status() == "Status: active", lambda: f"northd active: {northd_status()}")


def test_a_standalone_database_seeds_member_0s_cluster(members: Any) -> None:
    ms, ports, pki = members
    cs = containers()
    standalone = ms[0].dirs["/var/lib/ovn"] / "ovnnb_db.db"
    subprocess.run(["ovsdb-tool", "create", str(standalone), "/usr/share/ovn/ovn-nb.ovsschema"], check=True)
    txn = '["OVN_Northbound",{"op":"insert","table":"Logical_Switch","row":{"name":"from-the-deployment"}}]'
    subprocess.run(["ovsdb-tool", "transact", str(standalone), txn], check=True, capture_output=True)
    ms[0].start(cs["nb"])
    eventually(lambda: ms[0].probe_ok(cs["nb"]["readinessProbe"]), lambda: ms[0].output("nb"))
    assert "from-the-deployment" in nbctl(ports, 0, pki, "ls-list")
    assert (ms[0].dirs["/var/lib/ovn"] / "ovnnb_db.db.standalone").exists()
