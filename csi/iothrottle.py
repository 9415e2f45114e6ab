"""Block-device I/O limits in a cgroup: the only module that writes the kernel's throttle files.

cgroup v2: `io.max` ("MAJ:MIN rbps=… wbps=… riops=… wiops=…", "max" = unlimited) in a
cgroup whose subtree holds the pods (kubepods.slice / kubepods); v2 limits are
hierarchical, so one rule covers every pod, container and their writeback.
cgroup v1 (the hybrid layout of this development VM): `blkio.throttle.{read,write}_{bps,iops}_device`
("MAJ:MIN value", 0 removes the rule). v1 throttling is *flat*: a rule applies to the
tasks of the cgroup it is written in only. Written in the root blkio cgroup it covers
root-cgroup tasks and all buffered writeback (v1 writes back from the root), not direct
I/O issued from other v1 cgroups.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from csi.errors import FailedPrecondition
from csi.qos import IoLimits

log = logging.getLogger(__name__)

V1_ROOT = Path("/sys/fs/cgroup/blkio")
V2_ROOT = Path("/sys/fs/cgroup")
V2_CANDIDATES = ("kubepods.slice", "kubepods")
_V1_FILES = {
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
}
_V2_KEYS = {"read_bps": "rbps", "write_bps": "wbps", "read_iops": "riops", "write_iops": "wiops"}


def device_number(device: str) -> str:
    """ "MAJ:MIN" of a block device file."""
    rdev = os.stat(device).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


@dataclass(frozen=True, slots=True)
class DeviceThrottle:
    """Limits for block devices, written into one cgroup directory (v1 blkio or v2 with io.max)."""

    cgroup: Path

    @property
    def version(self) -> int:
        return 2 if (self.cgroup / "io.max").exists() else 1

    def apply(self, device: str, limits: IoLimits) -> None:
        """Set exactly `limits` for `device` (zeros clear), replacing whatever rule it had."""
        number = device_number(device)
        try:
            if self.version == 2:
                values = " ".join(f"{_V2_KEYS[k]}={v or 'max'}" for k, v in limits.numbers().items())
                (self.cgroup / "io.max").write_text(f"{number} {values}\n")
            else:
                for attr, name in _V1_FILES.items():
                    (self.cgroup / name).write_text(f"{number} {getattr(limits, attr)}\n")
        except OSError as e:
            raise FailedPrecondition(f"cannot set I/O limits of {device} in {self.cgroup}: {e}") from e
        log.info("I/O limits of %s (%s): %s", device, number, limits)

    def clear(self, device: str) -> None:
        self.apply(device, IoLimits())

    def current(self, device: str) -> IoLimits:
        """The limits the kernel holds for `device` (what is really in force)."""
        number = device_number(device)
        if self.version == 2:
            for line in (self.cgroup / "io.max").read_text().splitlines():
                dev, *pairs = line.split()
                if dev == number:
                    kv = dict(p.split("=", 1) for p in pairs)
                    return IoLimits.from_dict({a: _v2_value(kv.get(k, "max")) for a, k in _V2_KEYS.items()})
            return IoLimits()
        found: dict[str, int | str] = {}
        for attr, name in _V1_FILES.items():
            for line in (self.cgroup / name).read_text().splitlines():
                dev, value = line.split()
                if dev == number:
                    found[attr] = int(value)
        return IoLimits.from_dict(found)


def _v2_value(raw: str) -> int:
    return 0 if raw == "max" else int(raw)


def detect(configured: str) -> DeviceThrottle | None:
    """The throttle for `configured` (a cgroup directory, or "auto"); None when the node has none."""
    if configured and configured != "auto":
        path = Path(configured)
        if not ((path / "io.max").exists() or (path / _V1_FILES["read_bps"]).exists()):
            raise ValueError(f"{path} has neither io.max nor blkio.throttle files")
        return DeviceThrottle(path)
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "io" in controllers.read_text().split():
        for name in V2_CANDIDATES:
            if (V2_ROOT / name / "io.max").exists():
                return DeviceThrottle(V2_ROOT / name)
    if (V1_ROOT / _V1_FILES["read_bps"]).exists():
        return DeviceThrottle(V1_ROOT)
    return None
