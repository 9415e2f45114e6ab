"""How kubelet finds a CSI driver, on a machine with no kubelet and no registrar image.

In a cluster, the `node-driver-registrar` sidecar (daemonsets/csi/node.yaml) asks the driver its
name (Identity.GetPluginInfo) and serves kubelet's plugin registration API
(protos/pluginregistration.proto) on `/var/lib/kubelet/plugins_registry/<name>-reg.sock`;
kubelet watches that directory, calls GetInfo, connects to the endpoint it returns and reports
back with NotifyRegistrationStatus. `make node-up` runs this module as that registrar (`serve`,
a development stand-in doing the same calls), and `kubelet_endpoint` is kubelet's side: the
sandbox scenario and the tests reach the driver's Node service only through it.

python -m nodeenv.csi_registrar --csi-address unix:///…/csi.sock \\
    --kubelet-registration-path /…/csi.sock --registration-dir /var/lib/kubelet/plugins_registry
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from common.jsonlog import setup_logging
from protos import csi_pb2, csi_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc

log = logging.getLogger("csi-registrar")
CSI_PLUGIN = "CSIPlugin"
SUPPORTED_VERSIONS = ("1.0.0",)


class Registration(pluginregistration_pb2_grpc.RegistrationServicer):
    def __init__(self, name: str, endpoint: str) -> None:
        self.name, self.endpoint = name, endpoint
        self.registered = threading.Event()

    def GetInfo(
        self, request: pluginregistration_pb2.InfoRequest, context: grpc.ServicerContext
    ) -> pluginregistration_pb2.PluginInfo:
        return pluginregistration_pb2.PluginInfo(
            type=CSI_PLUGIN, name=self.name, endpoint=self.endpoint, supported_versions=SUPPORTED_VERSIONS
        )

    def NotifyRegistrationStatus(
        self, request: pluginregistration_pb2.RegistrationStatus, context: grpc.ServicerContext
    ) -> pluginregistration_pb2.RegistrationStatusResponse:
        if request.plugin_registered:
            log.info("kubelet registered %s at %s", self.name, self.endpoint)
            self.registered.set()
        else:
            log.error("kubelet refused %s: %s", self.name, request.error)
        return pluginregistration_pb2.RegistrationStatusResponse()


def driver_name(csi_address: str, timeout: float = 10.0) -> str:
    with grpc.insecure_channel(csi_address) as channel:
        info = csi_pb2_grpc.IdentityStub(channel).GetPluginInfo(
            csi_pb2.GetPluginInfoRequest(), timeout=timeout
        )
    return str(info.name)


def registration_socket(registration_dir: Path, name: str) -> Path:
    return registration_dir / f"{name}-reg.sock"


def serve(csi_address: str, endpoint: str, registration_dir: Path) -> int:
    name = driver_name(csi_address)
    sock = registration_socket(registration_dir, name)
    registration_dir.mkdir(parents=True, exist_ok=True)
    sock.unlink(missing_ok=True)  # a killed registrar leaves its socket behind
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(Registration(name, endpoint), server)
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    log.info("serving plugin registration of %s on %s", name, sock)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=2).wait()
    sock.unlink(missing_ok=True)  # kubelet deregisters a plugin whose socket is gone
    return 0


def kubelet_register(
    sock: Path, host: Callable[[str], Path] = Path, timeout: float = 5.0
) -> pluginregistration_pb2.PluginInfo | None:
    """kubelet's plugin watcher for one registration socket: GetInfo, then NotifyRegistrationStatus
    (registered when a CSI 1.x driver is at the endpoint, `host` mapping kubelet's path to this
    machine's); the plugin's info, or None when it is not a CSI plugin or was refused."""
    with grpc.insecure_channel(f"unix://{sock}") as channel:
        stub = pluginregistration_pb2_grpc.RegistrationStub(channel)
        info = stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=timeout)
        if info.type != CSI_PLUGIN:
            return None
        ok = host(info.endpoint).exists() and "1.0.0" in info.supported_versions
        status = pluginregistration_pb2.RegistrationStatus(
            plugin_registered=ok, error="" if ok else f"no CSI 1.x driver at {info.endpoint}"
        )
        stub.NotifyRegistrationStatus(status, timeout=timeout)
    return info if ok else None


def kubelet_endpoint(registration_dir: Path, name: str, timeout: float = 5.0) -> str:
    """kubelet's side: find `name` among the registration sockets, register it, return its endpoint."""
    for sock in sorted(registration_dir.glob("*.sock")):
        with grpc.insecure_channel(f"unix://{sock}") as channel:
            stub = pluginregistration_pb2_grpc.RegistrationStub(channel)
            if stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=timeout).name != name:
                continue
        info = kubelet_register(sock, timeout=timeout)
        if info is not None:
            return f"unix://{info.endpoint}"
    raise LookupError(f"no registration socket in {registration_dir} names CSI driver {name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="csi-registrar", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    env = os.environ
    p.add_argument(
        "--csi-address", default=env.get("CSI_ADDRESS", ""), help="the driver's socket (env CSI_ADDRESS)"
    )
    p.add_argument("--kubelet-registration-path", default=env.get("DRIVER_REG_SOCK_PATH", ""),
                   help="the driver's socket as kubelet sees it (env DRIVER_REG_SOCK_PATH)")  # fmt: skip
    p.add_argument("--registration-dir", type=Path, default=Path("/var/lib/kubelet/plugins_registry"),
                   help="kubelet's plugin registration directory")  # fmt: skip
    args = p.parse_args(argv)
    if not args.csi_address or not args.kubelet_registration_path:
        p.error("--csi-address and --kubelet-registration-path are required")
    setup_logging(env.get("CSI_REGISTRAR_LOG_LEVEL", "info"))
    return serve(args.csi_address, args.kubelet_registration_path, args.registration_dir)


if __name__ == "__main__":
    sys.exit(main())
