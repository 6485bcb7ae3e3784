"""Calibration on data simulated from known laws: coverage of central bands for every registered family.

Uses the family test table of ``tests/test_laws.py`` (true parameters and designs): per family, ``--curves``
curves with 2% multiplicative noise, every third point held out, fitted with ``fit_many``; reports the share of
held-out runs inside the central 50/80/90/95% run bands, the share of true parameters inside the 95% posterior
interval, and the median max r-hat. Writes ``benchmarks/results/coverage.json`` and the ``coverage`` section of
``benchmarks/RESULTS.md``.

    python -m benchmarks.coverage [--curves 24] [--draws 500] [--laws M2,chinchilla]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._common import RESULTS_MD, ROOT, update_markdown

sys.path.insert(0, str(ROOT / "tests"))
START, END = "<!-- coverage:start -->", "<!-- coverage:end -->"
LEVELS = (0.5, 0.8, 0.9, 0.95)


def run_family(name: str, n_curves: int, draws: int, seed: int) -> dict:
    import bayescale as bs
    from test_laws import FAMILIES, simulate

    law = bs.get_law(name)
    runs, truth = simulate(name, n_curves, seed)
    settings = dict(chains=4, warmup=draws, samples=draws)
    settings.update(FAMILIES[name][2] if len(FAMILIES[name]) > 2 else {})
    settings.pop("rhat_max", None)  # the test's tolerance, not a sampler setting
    t0 = time.perf_counter()
    fits = bs.fit_many(runs[~runs.held_out], law, group="curve", inputs={k: k for k in law.input_names}, y="y",
                       seed=seed, refit_flagged=False, progress=False, **settings)
    secs = time.perf_counter() - t0
    covered = {lv: [] for lv in LEVELS}
    recovered, rhats = [], []
    for g, f in fits.items():
        rhats.append(f.diagnostics["max_rhat"])
        for p, v in truth.items():
            lo, hi = np.quantile(f.posterior[p].values, [0.025, 0.975])
            recovered.append(lo <= v <= hi)
        test = runs[(runs.curve == g) & runs.held_out]
        bands = f.predict(test[list(law.input_names)], levels=LEVELS, seed=seed)
        for lv in LEVELS:
            covered[lv].extend(bands.covers(test["y"].to_numpy(), lv))
    return {"law": name, "curves": n_curves, "held_out": len(covered[0.9]), "seconds": secs,
            "coverage": {str(lv): float(np.mean(c)) for lv, c in covered.items()},
            "params_in_95": float(np.mean(recovered)), "median_max_rhat": float(np.median(rhats)),
            "ok_share": float(np.mean([f.ok for f in fits.values()])), "settings": settings}


def markdown(rows, meta) -> str:
    lines = [START, "## Calibration on simulated data (every family)", "",
             f"`{meta['command']}` on {meta['cpu_model']} ({meta['cpu_count']} cores, JAX {meta['jax_backend']}), "
             f"{meta['date']}. Truths and designs: the family table in `tests/test_laws.py`; 2% lognormal noise; "
             "every third point held out (interpolation). Coverage = share of held-out runs inside the central band "
             "of a new run.", "",
             "| law | held-out runs | 50% | 80% | 90% | 95% | true params in 95% CI | median max r-hat | ok |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["coverage"]
        lines.append(f"| {r['law']} | {r['held_out']} | {c['0.5']:.3f} | {c['0.8']:.3f} | {c['0.9']:.3f} | "
                     f"{c['0.95']:.3f} | {r['params_in_95']:.3f} | {r['median_max_rhat']:.3f} | {r['ok_share']:.0%} |")
    pooled = {lv: np.average([r["coverage"][lv] for r in rows], weights=[r["held_out"] for r in rows])
              for lv in ("0.5", "0.8", "0.9", "0.95")}
    lines.append(f"| pooled | {sum(r['held_out'] for r in rows)} | {pooled['0.5']:.3f} | {pooled['0.8']:.3f} | "
                 f"{pooled['0.9']:.3f} | {pooled['0.95']:.3f} | | | |")
    lines.append(END)
    return "\n".join(lines)


def main(argv=None):
    import bayescale as bs

    ap = argparse.ArgumentParser(prog="python -m benchmarks.coverage", description=__doc__.split("\n")[0])
    ap.add_argument("--laws", default=",".join(law.name for law in bs.list_laws()))
    ap.add_argument("--curves", type=int, default=24)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--md", default=str(RESULTS_MD))
    args = ap.parse_args(argv)
    from benchmarks.speed import machine_info

    meta = machine_info("python -m benchmarks.coverage " + " ".join(argv if argv is not None else sys.argv[1:]))
    rows = []
    for name in args.laws.split(","):
        rows.append(run_family(name, args.curves, args.draws, args.seed))
        print(json.dumps(rows[-1]), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "coverage.json").write_text(json.dumps({"machine": meta, "results": rows}, indent=2))
    if args.md:
        update_markdown(Path(args.md), markdown(rows, meta), START, END)


if __name__ == "__main__":
    main()
