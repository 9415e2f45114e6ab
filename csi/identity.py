"""CSI Identity service: who we are, what we can do, and whether the backend answers."""

from __future__ import annotations

import logging

import grpc
from google.protobuf import wrappers_pb2

from csi.backends.base import VolumeBackend
from csi.errors import CsiError
from csi.rpc import rpc
from csi.settings import DRIVER_NAME, VENDOR_VERSION
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)

Service = csi_pb2.PluginCapability.Service
Expansion = csi_pb2.PluginCapability.VolumeExpansion


class IdentityServicer(csi_pb2_grpc.IdentityServicer):
    def __init__(self, backend: VolumeBackend, *, group_controller: bool = False) -> None:
        self._backend = backend
        self._group_controller = group_controller

    @rpc
    def GetPluginInfo(
        self, request: csi_pb2.GetPluginInfoRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetPluginInfoResponse:
        return csi_pb2.GetPluginInfoResponse(
            name=DRIVER_NAME, vendor_version=VENDOR_VERSION, manifest={"backend": self._backend.name}
        )

    @rpc
    def GetPluginCapabilities(
        self, request: csi_pb2.GetPluginCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetPluginCapabilitiesResponse:
        caps = [
            csi_pb2.PluginCapability(service=Service(type=Service.CONTROLLER_SERVICE)),
            csi_pb2.PluginCapability(service=Service(type=Service.VOLUME_ACCESSIBILITY_CONSTRAINTS)),
            csi_pb2.PluginCapability(volume_expansion=Expansion(type=Expansion.ONLINE)),
        ]
        if self._group_controller:
            caps.append(csi_pb2.PluginCapability(service=Service(type=Service.GROUP_CONTROLLER_SERVICE)))
        return csi_pb2.GetPluginCapabilitiesResponse(capabilities=caps)

    @rpc
    def Probe(self, request: csi_pb2.ProbeRequest, context: grpc.ServicerContext) -> csi_pb2.ProbeResponse:
        try:
            self._backend.probe()
        except CsiError as e:
            log.warning("probe: backend %s not ready: %s", self._backend.name, e.msg)
            return csi_pb2.ProbeResponse(ready=wrappers_pb2.BoolValue(value=False))
        return csi_pb2.ProbeResponse(ready=wrappers_pb2.BoolValue(value=True))
