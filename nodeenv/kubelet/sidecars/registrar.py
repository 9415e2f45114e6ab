"""node-driver-registrar stand-in: nodeenv/csi_registrar.py (the registrar `make node-up` runs
outside the runner) run with the sidecar container's own args: it waits for the driver on
`--csi-address`, asks its name (GetPluginInfo) and serves kubelet's plugin registration API on
`<registration dir>/<driver>-reg.sock` (the container's `/registration` mount, the node's
`/var/lib/kubelet/plugins_registry`), answering GetInfo with `--kubelet-registration-path`; kubelet's
side (the runner's nodeenv/kubelet/storage/pluginwatcher.py) then registers the driver and writes
the node's CSINode. The socket is removed on SIGTERM (kubelet deregisters the driver).

Not done: the sidecar's `--http-endpoint` health check and its `--mode=kubelet-registration-probe`.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import grpc

from common.jsonlog import setup_logging
from nodeenv import csi_registrar
from nodeenv.kubelet.sidecars.base import wait_for_driver


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="csi-node-driver-registrar", description=__doc__.split("\n\n")[0])
    p.add_argument("--csi-address", default="/run/csi/socket")
    p.add_argument("--kubelet-registration-path", required=True)
    p.add_argument(
        "--registration-dir",
        type=Path,
        default=Path("/registration"),
        help="stand-in: the node path of the container's /registration mount",
    )
    args, _ = p.parse_known_args(argv)
    setup_logging("info")
    address = "unix://" + args.csi_address.removeprefix("unix://")
    with grpc.insecure_channel(address) as channel:
        if wait_for_driver(channel, address, threading.Event()) is None:
            return 1
    return csi_registrar.serve(address, args.kubelet_registration_path, args.registration_dir)


if __name__ == "__main__":
    sys.exit(main())
