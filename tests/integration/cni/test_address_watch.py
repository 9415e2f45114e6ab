"""The agent's address watch (cni/address_watch.py), in a network namespace of this test's own as
the agent runs in its node's: an IPv4 address added or removed there sets the event at once (the
platform guard then runs again without waiting for its 15 s refresh); a link added is no such change."""

from __future__ import annotations

import select
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

pytestmark = [pytest.mark.root]

WATCHER = """
import asyncio, sys
from cni.address_watch import address_changes

async def main():
    changed = asyncio.Event()
    watch = asyncio.create_task(address_changes(changed))
    await asyncio.sleep(0.3)
    print("watching", flush=True)
    while True:
        await changed.wait()
        changed.clear()
        print("changed", flush=True)

asyncio.run(main())
"""


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"k8sh-aw-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def _line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().strip() if ready else None


def test_an_address_added_or_removed_is_heard_at_once(netns: str) -> None:
    proc = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", WATCHER],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    ip = ["ip", "-n", netns]
    try:
        assert _line(proc, 20) == "watching"
        subprocess.run([*ip, "link", "add", "aw0", "type", "veth", "peer", "name", "aw1"], check=True)
        assert _line(proc, 1.0) is None, "a link change taken for an address change"
        for verb in ("add", "del"):
            started = time.monotonic()
            subprocess.run([*ip, "addr", verb, "10.250.99.7/32", "dev", "aw0"], check=True)
            assert _line(proc, 5) == "changed", f"addr {verb} not heard"
            print(f"addr {verb} heard after {1000 * (time.monotonic() - started):.1f} ms")
    finally:
        proc.terminate()
        proc.wait(10)
