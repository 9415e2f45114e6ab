"""Keep glibc's heap from growing under asyncio TLS reads: pin the mmap threshold, once per daemon.

asyncio's SSL transport reads with `SSLObject.read(256 KiB)` (`SSLProtocol.max_size`): every TLS
read allocates a 256 KiB bytes object and shrinks it to the bytes received. glibc serves blocks
at or above its mmap threshold (128 KiB) with mmap, but the threshold is dynamic: the first time
the process frees an mmapped block larger than the threshold (a big response, a big list), the
threshold rises to that size and from then on every 256 KiB read buffer is carved from the top of
the brk heap and shrunk in place. The small objects allocated between two reads pin the heap's
top, the holes left behind are never big enough for the next 256 KiB, and the heap grows with
the number of reads while the memory in use stays flat: project-controller's RSS grew ~10 KB per
project namespace created and deleted (cpython#109534, uvloop#726 describe the same allocation).

Setting M_MMAP_THRESHOLD explicitly turns the dynamic adjustment off (mallopt(3)), so those
buffers always come from mmap and go back to the kernel when freed. The same as exporting
`MALLOC_MMAP_THRESHOLD_=131072`, but done by the program, so it holds wherever it is started.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""mallopt(3) parameter number (glibc's malloc.h)."""
MMAP_THRESHOLD = 128 * 1024
"""glibc's own initial threshold: below asyncio's 256 KiB read buffers."""


def _libc() -> ctypes.CDLL | None:
    """glibc, or None (musl has a mallopt that ignores this parameter)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") else None


def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes (no dynamic raise); False when not on glibc."""
    libc = _libc()
    if libc is None:
        return False
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    if not ok:
        log.warning("mallopt(M_MMAP_THRESHOLD, %d) refused; the heap may grow under TLS reads", threshold)
    return ok
