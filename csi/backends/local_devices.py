"""Loop devices of the local backend's volume files, each with its volume's I/O limits.

A loop device number is reused by the next file attached, so the limits are written
on every attach (zeros clear a stale rule) and cleared before every detach.
"""

from __future__ import annotations

import logging
from pathlib import Path

from csi import loopdev
from csi.errors import FailedPrecondition
from csi.iothrottle import DeviceThrottle
from csi.qos import IoLimits

log = logging.getLogger(__name__)


class LocalDevices:
    def __init__(self, throttle: DeviceThrottle | None) -> None:
        self.throttle = throttle

    def check_enforceable(self, limits: IoLimits) -> None:
        if self.throttle is None and not limits.unlimited:
            raise FailedPrecondition(
                "this node has no cgroup I/O throttling (neither cgroup v2 io.max nor v1 blkio.throttle); "
                "only qosClass=unlimited can be honoured"
            )

    def attach(self, path: Path, limits: IoLimits) -> str:
        """The loop device of `path` (attached if needed) with exactly `limits` in force."""
        self.check_enforceable(limits)
        device = loopdev.attach(path)
        if self.throttle is not None:
            self.throttle.apply(device, limits)
        return device

    def limit_attached(self, path: Path, limits: IoLimits) -> list[str]:
        """Put `limits` in force on every loop device of `path`; returns those devices."""
        self.check_enforceable(limits)
        devices = loopdev.find(path)
        if self.throttle is not None:
            for device in devices:
                self.throttle.apply(device, limits)
        return devices

    def detach(self, device: str) -> None:
        if self.throttle is not None:
            try:
                self.throttle.clear(device)
            except (FailedPrecondition, OSError):  # gone already: nothing to clear
                log.warning("could not clear the I/O limits of %s before detaching it", device)
        loopdev.detach(device)

    def detach_all(self, path: Path) -> None:
        for device in loopdev.find(path):
            self.detach(device)
