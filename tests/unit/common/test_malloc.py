"""glibc's mmap threshold stays pinned in our daemons (common/malloc.py).

Each check runs in a fresh interpreter, whose allocator state nothing else has touched. The probe
frees a 4 MiB block (which makes glibc raise a dynamic threshold to 4 MiB), then allocates 256 KiB
buffers, the size asyncio's SSL transport allocates for every TLS read, and reports whether they
came from mmap (mallinfo2's mmapped bytes grew by them) or from the brk heap (where those buffers
fragment the heap: project-controller grew ~10 KB per project namespace that way).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import ctypes

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2

def tls_read_buffer_is_mmapped():
    big = bytes(4 << 20)
    del big
    before = libc.mallinfo2().hblkhd
    buffers = [bytes(256 << 10) for _ in range(8)]
    mmapped = libc.mallinfo2().hblkhd - before
    return mmapped >= 6 * len(buffers[0])  # (one may fit in the heap's free top: served from there)
"""


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE + code], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def test_without_pinning_glibc_moves_tls_read_buffers_to_the_heap() -> None:
    """The behaviour the fix is about (if this fails, glibc changed and the pin may be moot)."""
    assert run("print(tls_read_buffer_is_mmapped())") == "False"


def test_pin_keeps_tls_read_buffers_in_mmap() -> None:
    code = "from common.malloc import pin_mmap_threshold\n"
    code += "print(pin_mmap_threshold(), tls_read_buffer_is_mmapped())"
    assert run(code) == "True True"


def test_every_controller_entry_point_pins_it() -> None:
    """ControllerApp.main (project-controller's here; every controller runs it) pins the threshold
    before anything else, even when it then exits for want of a kubeconfig."""
    code = (
        "from controllers.projects.main import main\n"
        "rc = main(['--kubeconfig', '/nonexistent/kubeconfig', '--leader-elect=false',\n"
        "           '--metrics-address=off'])\n"
        "print(rc, tls_read_buffer_is_mmapped())"
    )
    assert run(code) == "1 True"
