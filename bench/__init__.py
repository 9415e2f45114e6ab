"""Benchmarks: `make bench` runs every bench/bench_*.py; `make bench BENCH=cni` runs one."""
