"""OVN's databases take mutual TLS only (cluster; one node's central is on unix sockets only): from
a node, a plaintext NB client (`ovn-nbctl --db=tcp:...`) and a TLS client without a certificate
are refused by every NB member, and one with a certificate of the cluster's CA is answered."""

from __future__ import annotations

import subprocess
from pathlib import Path

from nodeenv.node import read_env_file
from nodeenv.ovn_pki import OvnPki
from nodeenv.ovsdb_probe import client_context, list_dbs
from nodeenv.scenario import Scenario


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None:
        return
    env = read_env_file(cluster.env_file)
    members = [(r.split(":")[1], int(r.split(":")[2])) for r in env["OVN_NB_DB_SSL"].split(",")]
    pki, place = OvnPki(Path(env["OVN_PKI_DIR"])), scn.at(0)
    with scn.step("ovn tls: plaintext NB client (ovn-nbctl --db=tcp:) refused", on=place.name) as r:
        for host, port in members:
            argv = place.argv(["ovn-nbctl", f"--db=tcp:{host}:{port}", "--timeout=5", "ls-list"])
            out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            if out.returncode == 0:
                raise RuntimeError(f"tcp:{host}:{port} answered a plaintext client: {out.stdout!r}")
        r.detail = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    with scn.step("ovn tls: NB client without a certificate refused", on=place.name) as r:
        for host, port in members:
            answer = list_dbs(host, port, client_context(pki.ca_cert, None), place.netns)
            if not answer.refused:
                raise RuntimeError(f"ssl:{host}:{port} answered a client without a certificate")
        r.detail = answer.error
    with scn.step("ovn tls: NB client with the cluster CA's certificate answered", on=place.name) as r:
        ctx = client_context(pki.ca_cert, pki.issue(f"sandbox-{place.name}"))
        for host, port in members:
            answer = list_dbs(host, port, ctx, place.netns)
            if answer.refused:
                raise RuntimeError(f"ssl:{host}:{port} refused a client of the cluster's CA: {answer.error}")
        r.detail = ",".join(answer.databases)
