"""python -m dashboards: write every dashboard's Grafana JSON (`make dashboards`), or --check that the
checked-in files are what the generator writes (exit 1 naming the stale or missing ones)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dashboards.catalogue import DASHBOARDS
from dashboards.grafana import render

OUT = Path(__file__).resolve().parents[1] / "daemonsets" / "monitoring" / "dashboards"


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dashboards", description=__doc__)
    p.add_argument("--out", default=env.get("K8SHOST_DASHBOARDS_DIR", str(OUT)),
                   help=f"where the JSON files go (env K8SHOST_DASHBOARDS_DIR; default {OUT})")  # fmt: skip
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    return p


def stale(out: Path) -> list[str]:
    """The dashboards whose file under `out` is missing or differs from the generator's output,
    and files there no dashboard writes."""
    wanted = {d.file_name: render(d) for d in DASHBOARDS}
    bad = [n for n, text in wanted.items() if not (out / n).exists() or (out / n).read_text() != text]
    return bad + sorted(p.name for p in out.glob("*.json") if p.name not in wanted)


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser(os.environ).parse_args(argv)
    out = Path(a.out)
    if a.check:
        bad = stale(out)
        for name in bad:
            print(
                f"dashboards: {out / name} is not the generator's output (run `make dashboards`)",
                file=sys.stderr,
            )
        return 1 if bad else 0
    out.mkdir(parents=True, exist_ok=True)
    for d in DASHBOARDS:
        (out / d.file_name).write_text(render(d))
    print(f"dashboards: wrote {len(DASHBOARDS)} dashboards to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
