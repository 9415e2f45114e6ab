"""Writing a secret (a private key, a kubeconfig with a token) so that it is never readable by
anyone else, not even for a moment, and never written through a planted symlink.

The data goes to a fresh name in the target's directory, created with O_CREAT|O_EXCL|O_NOFOLLOW and
mode 0600 (no chmod after the fact), then renamed over the target: rename replaces a symlink at the
target rather than following it, and a reader sees the old file or the whole new one.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

MODE = 0o600


def write_secret(path: Path, data: bytes) -> Path:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
