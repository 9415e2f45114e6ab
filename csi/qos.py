"""Volume QoS: the mutable parameters of a VolumeAttributesClass, parsed into I/O limits.

Pure (no I/O). Keys a VolumeAttributesClass (CSI `mutable_parameters`) may carry:

  qosClass             bronze | silver | gold | unlimited (the limits of QOS_CLASSES)
  readBytesPerSecond   bytes/s, plain or with a K/M/G/Ki/Mi/Gi suffix; 0 = no limit
  writeBytesPerSecond  as above
  readIOPS, writeIOPS  operations per second; 0 = no limit

Explicit limits override the class's. The StorageClass keys (`type`, `replication`,
`org_id`, `project_id`) are fixed at creation: naming them here is INVALID_ARGUMENT,
as is any other key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from csi.errors import InvalidArgument

CLASS_KEY = "qosClass"
LIMIT_KEYS = {
    "readBytesPerSecond": "read_bps",
    "writeBytesPerSecond": "write_bps",
    "readIOPS": "read_iops",
    "writeIOPS": "write_iops",
}
MUTABLE_KEYS = frozenset({CLASS_KEY, *LIMIT_KEYS})
IMMUTABLE_KEYS = frozenset({"type", "replication", "org_id", "project_id"})
_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
_NUMBER = re.compile(r"(\d+)(Ki|Mi|Gi|K|M|G)?")


@dataclass(frozen=True, slots=True, kw_only=True)
class IoLimits:
    """Per-volume limits; 0 means unlimited. `qos_class` names the class they started from."""

    read_bps: int = 0
    write_bps: int = 0
    read_iops: int = 0
    write_iops: int = 0
    qos_class: str = ""

    @property
    def unlimited(self) -> bool:
        return not any(self.numbers().values())

    def numbers(self) -> dict[str, int]:
        """The four limits by attribute name (what the kernel is told)."""
        return {a: getattr(self, a) for a in LIMIT_KEYS.values()}

    def as_dict(self) -> dict[str, int | str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, int | str]) -> IoLimits:
        numbers = {f.name: int(raw.get(f.name, 0)) for f in fields(cls) if f.name != "qos_class"}
        return cls(**numbers, qos_class=str(raw.get("qos_class", "")))


MIB = 1 << 20
QOS_CLASSES = {
    "bronze": IoLimits(read_bps=20 * MIB, write_bps=20 * MIB, read_iops=500, write_iops=500),
    "silver": IoLimits(read_bps=100 * MIB, write_bps=100 * MIB, read_iops=2000, write_iops=2000),
    "gold": IoLimits(read_bps=400 * MIB, write_bps=400 * MIB, read_iops=8000, write_iops=8000),
    "unlimited": IoLimits(),
}


def check_keys(params: Mapping[str, str]) -> None:
    """INVALID_ARGUMENT for immutable or unknown keys among mutable parameters."""
    immutable = sorted(set(params) & IMMUTABLE_KEYS)
    if immutable:
        raise InvalidArgument(
            f"{', '.join(immutable)} cannot be changed after creation (StorageClass parameters)"
        )
    unknown = sorted(set(params) - MUTABLE_KEYS)
    if unknown:
        raise InvalidArgument(
            f"unknown mutable parameters: {', '.join(unknown)} (supported: {', '.join(sorted(MUTABLE_KEYS))})"
        )


def _quantity(key: str, value: str) -> int:
    m = _NUMBER.fullmatch(value.strip())
    if m is None:
        raise InvalidArgument(
            f"{key} must be a non-negative integer (optionally K/M/G/Ki/Mi/Gi), got {value!r}"
        )
    return int(m.group(1)) * _SUFFIXES[m.group(2) or ""]


def limits_from(params: Mapping[str, str], base: IoLimits | None = None) -> IoLimits:
    """The limits `params` ask for, on top of `base` (what the volume has now) for keys not named."""
    check_keys(params)
    limits: dict[str, Any] = asdict(base or IoLimits())
    if CLASS_KEY in params:
        name = params[CLASS_KEY]
        if name not in QOS_CLASSES:
            raise InvalidArgument(f"unknown {CLASS_KEY} {name!r} (known: {', '.join(QOS_CLASSES)})")
        limits = {**asdict(QOS_CLASSES[name]), "qos_class": name}
    for key, attr in LIMIT_KEYS.items():
        if key in params:
            limits[attr] = _quantity(key, params[key])
    return IoLimits(**limits)
