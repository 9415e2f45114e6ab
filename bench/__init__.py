"""Benchmarks: `make bench` runs every bench/bench_*.py; `make bench BENCH=cni` runs one."""

from nodeenv import ovn_tree

# The OVN tree's programs (nodeenv/ovn_tree.py) first in PATH of every `python -m bench...`, when made:
# each bench that starts OVN goes through the node environment, which requires the tree ("run `make
# ovs`"); bench/__main__.py (`make bench`) requires it outright. Unit tests import bench/ without it.
ovn_tree.activate(required=False)
