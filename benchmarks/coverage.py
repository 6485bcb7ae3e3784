"""Calibration on data simulated from known laws: coverage of central bands for every registered family.

Uses the family table :data:`bayescale.simulate.EXAMPLES` (true parameters and designs): per family, ``--curves``
curves with 2% multiplicative noise, every third point held out, fitted with ``fit_many``; reports the share of
held-out runs inside the central 50/80/90/95% run bands, the share of true parameters inside the 95% posterior
interval, and the median max r-hat. Writes ``benchmarks/results/coverage.json`` and the ``coverage`` table of
``benchmarks/RESULTS.md``.

    python -m benchmarks.coverage [--curves 24] [--draws 500] [--laws M2,chinchilla]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._common import (RESULTS, Table, command_line, describe, load_json, machine_info, output_args,
                                publish, save_json, shown)

LEVELS = (0.5, 0.8, 0.9, 0.95)


def run_family(name: str, n_curves: int, draws: int, seed: int) -> dict:
    import bayescale as bs
    from bayescale.simulate import EXAMPLES, simulate

    law = bs.get_law(name)
    runs, truth = simulate(name, n_curves, seed)
    settings = dict(chains=4, warmup=draws, samples=draws)
    settings.update(EXAMPLES[name].fit_settings)
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


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / "coverage.json")
    if res is None:
        return []
    rows, body = res["results"], []
    for r in rows:
        c = r["coverage"]
        body.append([r["law"], r["held_out"], *(f"{c[lv]:.3f}" for lv in ("0.5", "0.8", "0.9", "0.95")),
                     f"{r['params_in_95']:.3f}", f"{r['median_max_rhat']:.3f}", f"{r['ok_share']:.0%}"])
    pooled = [np.average([r["coverage"][lv] for r in rows], weights=[r["held_out"] for r in rows])
              for lv in ("0.5", "0.8", "0.9", "0.95")]
    body.append(["pooled", sum(r["held_out"] for r in rows), *(f"{v:.3f}" for v in pooled), "", "", ""])
    m = res["machine"]
    return [Table("coverage", m["command"], f"{describe(m)}; {shown(out / 'coverage.json')}",
                  ["law", "held-out runs", "50%", "80%", "90%", "95%", "true params in 95% CI", "median max r-hat",
                   "ok"], body)]


def main(argv=None):
    import bayescale as bs

    ap = argparse.ArgumentParser(prog="python -m benchmarks.coverage", description=__doc__.split("\n")[0])
    ap.add_argument("--laws", default=",".join(law.name for law in bs.list_laws()))
    ap.add_argument("--curves", type=int, default=24)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2)
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("coverage", argv))
    rows = []
    for name in args.laws.split(","):
        rows.append(run_family(name, args.curves, args.draws, args.seed))
        print(json.dumps(rows[-1]), flush=True)
    save_json(args.out / "coverage.json", {"machine": meta, "results": rows})
    publish(tables, args)


if __name__ == "__main__":
    main()
