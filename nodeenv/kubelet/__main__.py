"""`python -m nodeenv.kubelet run|boot|down|status` (nodeenv/kubelet/cli.py)."""

from __future__ import annotations

import sys

from nodeenv.kubelet.cli import main

if __name__ == "__main__":
    sys.exit(main())
