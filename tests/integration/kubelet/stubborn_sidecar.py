"""A sidecar stand-in that ignores SIGTERM, as a container whose process never handles it
(test_runner_teardown.py): the runner has to kill it by PID after its grace period."""

from __future__ import annotations

import signal
import time


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
