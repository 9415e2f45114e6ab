"""Run the benchmarks. Each bench/bench_<name>.py has main() that prints its own figures."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench
from nodeenv import ovn_tree


def main(argv: list[str]) -> int:
    ovn_tree.activate()  # the OVN tree (build/ovn-trixie) or a DaemonError naming `make ovs`
    names = sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(bench.__path__)
        if m.name.startswith("bench_")
    )
    wanted = argv or names
    unknown = set(wanted) - set(names)
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: {', '.join(names) or 'none'}")
        return 2
    if not names:
        print("no benchmarks yet")
    for name in wanted:
        print(f"== bench {name}")
        importlib.import_module(f"bench.bench_{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
