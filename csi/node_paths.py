"""Target and staging paths are kubelet's: confined to its root directory(ies) (`--kubelet-dir`).

A path is resolved with realpath (every symlink followed, also in a parent a tenant could have
replaced) and must lie strictly inside one of the roots; anything else is INVALID_ARGUMENT, so a
request cannot have the node plugin mount over /etc or a host directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from csi.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class KubeletPaths:
    roots: tuple[str, ...]

    @classmethod
    def of(cls, roots: Sequence[str]) -> KubeletPaths:
        return cls(tuple(os.path.realpath(r) for r in roots if r))

    def confine(self, name: str, path: str) -> str:
        """`path` resolved, or InvalidArgument when it is not inside a root."""
        real = os.path.realpath(path)
        if not any(real.startswith(root.rstrip("/") + "/") for root in self.roots):
            raise InvalidArgument(
                f"{name} {path!r:.200} is outside kubelet's directory ({', '.join(self.roots)})"
            )
        return real
