"""Re-render every table of ``benchmarks/RESULTS.md`` from ``benchmarks/results/*.json``, rerunning nothing.

    python -m benchmarks.tables                # rewrite each table between its markers
    python -m benchmarks.tables --check        # exit 1 if a table is not what its result files give
    python -m benchmarks.tables --self-check   # the renderer's and the replay summary's own checks

Each benchmark module in ``MODULES`` has ``tables(out)``.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from benchmarks._common import RESULTS, RESULTS_MD, self_check, stale_tables, write_tables

MODULES = ("speed", "first_answer", "cold_fit", "own_errors", "batching", "fleet", "honest_bands", "stacking",
           "robust_chinchilla", "misspecified", "pfn", "pfn_views", "pfn_error", "pfn_speed", "init", "coverage",
           "active_learning", "report_screenshot", "local_fit", "replay_rescore", "extrapolation")


def all_tables(out: Path = RESULTS) -> list:
    return [t for m in MODULES for t in importlib.import_module(f"benchmarks.{m}").tables(out)]


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tables", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the result files (default %(default)s)")
    ap.add_argument("--md", type=Path, default=RESULTS_MD)
    ap.add_argument("--check", action="store_true", help="change nothing; list the tables that are out of date")
    ap.add_argument("--self-check", action="store_true")
    args = ap.parse_args(argv)
    if args.self_check:
        self_check()
        return []
    tables = all_tables(args.out)
    if args.check:
        stale = stale_tables(tables, args.md)
        print(f"{len(tables) - len(stale)}/{len(tables)} tables up to date" + (f"; stale: {', '.join(stale)}" if stale
                                                                               else ""))
        if stale:
            raise SystemExit(1)
        return []
    names = write_tables(tables, args.md)
    print(f"{len(names)} tables -> {args.md}: {', '.join(names)}")
    return names


if __name__ == "__main__":
    main()
