"""python -m nodeenv.image build | retag TAG | env (see nodeenv/image/build.py, retag.py, store.py)."""

from __future__ import annotations

import os
import sys

from nodeenv.image.build import main as build
from nodeenv.image.retag import main as retag
from nodeenv.image.store import ImageStore


def main(argv: list[str]) -> int:
    if argv == ["build"]:
        return build()
    if len(argv) == 2 and argv[0] == "retag":
        return retag(argv[1])
    if argv == ["env"]:
        store = ImageStore.from_env(os.environ)
        store.ensure()
        print("".join(f"export {k}={v}\n" for k, v in store.env().items()), end="")
        return 0
    print("usage: python -m nodeenv.image build | retag TAG | env", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
