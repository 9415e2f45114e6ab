"""Component: one ovn-central-exporter per OVN central member, as each ovn-central pod runs one
beside its member (daemonsets/base/ovn/ovn-central.yaml): member i's NB and SB control sockets and
the i-th northd's (members beyond the northds get none). Started in the central's namespace, /metrics
on its loopback; `OVN_CENTRAL_METRICS` lists their URLs, comma-separated, by member."""

from __future__ import annotations

import sys

from nodeenv.daemons import free_port, http_ready, http_ready_in, start_foreground, wait_for
from nodeenv.node import Node
from nodeenv.ovn_central import DATABASES, OvnCentral, central_dir


class CentralExporters:
    name = "ovn-central-exporter"

    def __init__(self, central: OvnCentral) -> None:
        self.central = central

    def start(self, node: Node) -> dict[str, str]:
        directory, netns = central_dir(node), node.settings.netns
        northds = list(self.central.northd_ctls(node).values())
        members = [m.index for m in self.central.member_list(directory, DATABASES[0])]
        urls = []
        for n, index in enumerate(members):
            port = free_port()
            member = {db.key: self.central.member(node, db.key, index) for db in DATABASES}
            argv = [sys.executable, "-m", "ovnaccess.central_exporter", f"--metrics-address=127.0.0.1:{port}",
                    "--nb-ctl", str(member["nb"].ctl), "--sb-ctl", str(member["sb"].ctl),
                    "--nb-db", str(member["nb"].dbfile), "--sb-db", str(member["sb"].dbfile),
                    "--northd", str(northds[n]) if n < len(northds) else ""]  # fmt: skip
            label = f"{self.name}{index or ''}"
            _, proc = start_foreground(label, argv, node.path(self.name, f"{label}.log"), node.process_env(),
                                       node.daemons, netns)  # fmt: skip
            url = f"http://127.0.0.1:{port}"
            check = (lambda u=url: http_ready_in(netns, f"{u}/healthz")) if netns else (
                lambda u=url: http_ready(f"{u}/healthz"))  # fmt: skip
            wait_for(check, f"{label} /healthz", timeout=15, proc=proc)
            urls.append(f"{url}/metrics")
        return {"OVN_CENTRAL_METRICS": ",".join(urls)}

    def cleanup(self, node: Node) -> None:
        """The exporters are stopped by PID with the central's daemons; they leave nothing behind."""
