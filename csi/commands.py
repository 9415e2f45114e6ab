"""Running the node's storage tools (mount, mkfs, losetup, ...): argv in, stdout out, CommandFailed."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence

from csi.errors import CommandFailed

log = logging.getLogger(__name__)


def run(argv: Sequence[str], *, ok_codes: tuple[int, ...] = (0,), timeout: float = 120.0) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode not in ok_codes:
        raise CommandFailed(list(argv), proc.returncode, proc.stderr or proc.stdout)
    log.debug("ran %s", " ".join(argv))
    return proc.stdout


def run_code(argv: Sequence[str], *, timeout: float = 120.0) -> tuple[int, str]:
    """Run and return (returncode, stdout) for tools whose exit code is an answer (blkid)."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout
