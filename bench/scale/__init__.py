"""The scale bench's parts (`make bench BENCH=scale`, bench/bench_scale.py): the frame that steps each
curve's sizes and prints its table and growth exponents (frame.py), what it samples of the cluster's
processes and databases (sample.py), and one module per curve (services.py, policies.py)."""
