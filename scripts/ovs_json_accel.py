"""Give the virtualenv's python-ovs its C JSON parser (`ovs._json`), if it lacks one.

PyPI's `ovs` builds `ovs._json` only where libopenvswitch's headers are installed, and
otherwise falls back, silently, to a pure-Python parser that reads OVSDB traffic one
character at a time. Every ovsdbapp commit and every update the agent's IDLs receive goes
through it. Debian's python3-openvswitch ships the extension built for the system CPython;
when its ABI tag matches this interpreter's, link it into the venv's `ovs` package.

Run with the venv's interpreter (scripts/setup.sh does). Prints what it did; exit 0 unless
linking was attempted and the extension then failed to import (the link is removed again).
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
from pathlib import Path

SYSTEM_OVS = Path("/usr/lib/python3/dist-packages/ovs")


def main() -> int:
    import ovs.json

    if ovs.json.PARSER == ovs.json.PARSER_C:
        return 0
    name = "_json" + str(sysconfig.get_config_var("EXT_SUFFIX"))
    source = SYSTEM_OVS / name
    if not source.exists():
        print(f"setup: no {source} (Debian python3-openvswitch); OVSDB JSON stays pure Python")
        return 0
    target = Path(ovs.__file__).parent / name
    target.unlink(missing_ok=True)
    target.symlink_to(source)
    try:
        importlib.import_module("ovs._json")
    except ImportError as e:
        target.unlink()
        print(f"setup: {source} does not load here ({e}); OVSDB JSON stays pure Python")
        return 1
    print(f"setup: linked python-ovs's C JSON parser from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
