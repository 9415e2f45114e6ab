"""Whether this node's ovn-controller answers, for `prismnet_ovn_controller_up` (OvnControllerDown).

ovn-controller serves OVS's unixctl protocol (JSON-RPC over a unix socket) on
`<rundir>/ovn-controller.<pid>.ctl`. At each scrape the probe sends `version` to every such socket
in `--ovn-rundir` (a killed process leaves its socket file behind: it refuses the connection) and
reports 1 if one answers within the timeout (a wedged process does not), else 0. Without
`--ovn-rundir` nothing is probed and the metric is absent (the agent cannot see that directory).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

NAME = "prismnet_ovn_controller_up"


def answers(ctl: Path, timeout: float) -> bool:
    """`version` sent to the unixctl socket `ctl` gets a JSON-RPC result back within `timeout`."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(ctl))
            s.sendall(json.dumps({"method": "version", "params": [], "id": 0}).encode())
            buf = b""
            while chunk := s.recv(4096):
                buf += chunk
                try:
                    reply = json.loads(buf)
                except ValueError:
                    continue
                return isinstance(reply, dict) and reply.get("error") is None and reply.get("id") == 0
    except OSError:
        return False
    return False


class OvnControllerProbe(Collector):
    def __init__(self, rundir: Path, timeout: float = 1.0) -> None:
        self.rundir, self.timeout = rundir, timeout

    def up(self) -> bool:
        return any(answers(ctl, self.timeout) for ctl in sorted(self.rundir.glob("ovn-controller.*.ctl")))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(NAME, "1 when this node's ovn-controller answers its control socket",
                                value=1.0 if self.up() else 0.0)  # fmt: skip
