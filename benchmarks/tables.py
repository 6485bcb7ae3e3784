"""Re-render every table of ``benchmarks/RESULTS.md`` from ``benchmarks/results/*.json``, rerunning nothing.

    python -m benchmarks.tables                # rewrite each table between its markers
    python -m benchmarks.tables --check        # exit 1 if a table is not what its result files give
    python -m benchmarks.tables --self-check   # the renderer's and the replay summary's own checks

Each benchmark module in ``MODULES`` has ``tables(out)``. The PFN section is still one block that
``benchmarks/pfn.py`` renders whole from ``pfn.json`` (its ``markdown``); it is re-rendered and checked the same way.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from benchmarks._common import RESULTS, RESULTS_MD, load_json, self_check, stale_tables, update_markdown, write_tables

MODULES = ("speed", "first_answer", "batching", "fleet", "honest_bands", "stacking", "robust_chinchilla", "misspecified",
           "pfn_views", "pfn_error", "pfn_speed", "init", "coverage", "active_learning", "report_screenshot",
           "local_fit", "replay_rescore", "extrapolation")


def all_tables(out: Path = RESULTS) -> list:
    return [t for m in MODULES for t in importlib.import_module(f"benchmarks.{m}").tables(out)]


def whole_sections(out: Path = RESULTS) -> list[tuple[str, str, str]]:
    """(start marker, end marker, text) of the sections a script still renders whole: the PFN section."""
    from benchmarks import pfn

    res = load_json(out / "pfn.json")
    return [] if res is None else [(pfn.START, pfn.END, pfn.markdown(res))]


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
    tables, sections = all_tables(args.out), whole_sections(args.out)
    if args.check:
        text = args.md.read_text()
        stale = stale_tables(tables, args.md) + [start for start, _, section in sections if section not in text]
        print(f"{len(tables) + len(sections) - len(stale)}/{len(tables) + len(sections)} tables and sections up to "
              "date" + (f"; stale: {', '.join(stale)}" if stale else ""))
        if stale:
            raise SystemExit(1)
        return []
    names = write_tables(tables, args.md)
    for start, end, section in sections:
        update_markdown(args.md, section, start, end)
    print(f"{len(names)} tables and {len(sections)} whole section(s) -> {args.md}: {', '.join(names)}")
    return names


if __name__ == "__main__":
    main()
