"""Local fits (``Fit.localize``): calibration on data simulated from a known law, and accuracy on real runs.

A local fit gives each run an extra error tau x d (ln units; d: its distance in decades from the points to predict),
so that runs far from the target count less. Its bands are checked like every other way of producing bands:

- ``sim``: the real Chinchilla design (N, D) with losses from Hoffmann et al.'s law x lognormal 1% noise, one noise
  draw per world; fitted on the runs below 1e21 FLOP, predicted at the 23 runs at or above it. Coverage of the
  90% band of the mean curve (against the noise-free law) and of a new run (against the noisy runs), and RMSLE
  of the median against the noise-free law; the global fit, the global fit with its calibrated extrapolation error
  (``Fit.calibrate``, tau by leave-future-out on the fitted runs), and the local fit with that tau.
- ``real``: the same on the real Chinchilla runs (Epoch AI's re-extraction): the whole pool below 1e21 FLOP, and
  the pool restricted to at least one token per parameter.

tau is never taken from the targets: leave-future-out on the fitted runs only. When it comes out 0 (no
extrapolation error found), the local fit is the global one.

    python -m benchmarks.local_fit [--worlds 16] [--draws 500]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._common import (LEGACY_LIKELIHOOD, RESULTS, Table, command_line, load_json, machine_line, now,
                                output_args, publish, save_json, shown, simulated_chinchilla)


def _runs(world: int | None) -> pd.DataFrame:
    import bayescale as bs

    if world is not None:
        return simulated_chinchilla(world)
    return bs.datasets.chinchilla().assign(truth=np.nan)


def _score(f, target: pd.DataFrame) -> dict:
    b = f.predict(target[["N", "D"]], levels=(0.9,), seed=0).data
    y, truth = target["loss"].to_numpy(float), target["truth"].to_numpy(float)
    med = b["curve_median"].values
    out = {"run_cover90": float(np.mean((b["run_lower"].values[0] <= y) & (y <= b["run_upper"].values[0]))),
           "rmsle_runs": float(np.sqrt(np.mean(np.log(b["run_median"].values / y) ** 2))),
           "band_width": float(np.median(np.log(b["curve_upper"].values[0] / b["curve_lower"].values[0]))),
           "log_density": float(np.mean(f.log_predictive_density(target[["N", "D"]], y)))}
    if np.isfinite(truth).all():
        out["curve_cover90"] = float(np.mean((b["curve_lower"].values[0] <= truth) & (truth <= b["curve_upper"].values[0])))
        out["rmsle_truth"] = float(np.sqrt(np.mean(np.log(med / truth) ** 2)))
    return out


def one(world: int | None, draws: int, min_tokens_per_param: float = 0.0) -> dict:
    import bayescale as bs

    runs = _runs(world)
    train = runs[(runs["C"] < 1e21) & (runs["D"] >= min_tokens_per_param * runs["N"])]
    target = runs[runs["C"] >= 1e21].reset_index(drop=True)
    kw = dict(chains=4, warmup=draws, samples=draws, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        glob = bs.fit(train, "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", seed=0, likelihood=LEGACY_LIKELIHOOD,
                      **kw)
        cal = glob.calibrate(seed=0, **kw)
        # tau re-estimated on the local fit (leave-future-out again), never below the global fit's
        local = cal.localize(target[["N", "D"]], seed=0, **kw) if cal.discrepancy > 0 else cal
    return {"tau": cal.discrepancy, "tau_local": local.discrepancy, "runs": len(train),
            **{f"{name}_{k}": v for name, f in (("global", glob), ("calibrated", cal), ("local", local))
               for k, v in _score(f, target).items()}}


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / "local_fit.json")
    if res is None:
        return []
    rows = []
    for key, label in (("sim", f"simulated, {res['sim']['worlds']} worlds (Hoffmann law, 1% noise)"),
                       ("real", "real Chinchilla runs"), ("real_dn1", "real, D/N >= 1 runs fitted")):
        r = res[key]
        for fit in ("global", "calibrated", "local"):
            cc = r.get(f"{fit}_curve_cover90")
            tau = 0.0 if fit == "global" else r["tau_local" if fit == "local" else "tau"]
            rows.append([label, fit, f"{tau:.3g}", "" if cc is None else f"{cc:.2f}", f"{r[f'{fit}_run_cover90']:.2f}",
                         "" if cc is None else f"{r[f'{fit}_rmsle_truth']:.4f}", f"{r[f'{fit}_rmsle_runs']:.4f}",
                         f"{r[f'{fit}_log_density']:.3f}", f"{r[f'{fit}_band_width']:.3f}"])
    return [Table("local_fit", res["command"], f"{res['machine']}, {res['timestamp']}; NUTS 4 chains x "
                  f"({res['draws']} + {res['draws']}); {shown(out / 'local_fit.json')}",
                  ["data", "fit", "tau", "90% band of the mean curve covers the true law",
                   "90% band of a run covers the run", "RMSLE of the median (vs true law)", "RMSLE (vs runs)",
                   "log density", "band width (ln)"], rows)]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.local_fit", description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=16)
    ap.add_argument("--draws", type=int, default=500)
    output_args(ap)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    sims = []
    for w in range(args.worlds):
        sims.append(one(w, args.draws))
        print(f"world {w}: " + ", ".join(f"{k} {v:.3g}" for k, v in sims[-1].items()), flush=True)
    sim = {k: float(np.median([s[k] for s in sims]) if k.startswith("tau") else np.mean([s[k] for s in sims]))
           for k in sims[0]}
    sim.update(worlds=args.worlds, tau_positive=int(sum(s["tau"] > 0 for s in sims)), per_world=sims)
    res = {"command": command_line("local_fit", argv), "timestamp": now(),
           "machine": machine_line(), "draws": args.draws, "sim": sim, "real": one(None, args.draws),
           "real_dn1": one(None, args.draws, 1.0)}
    for k in ("real", "real_dn1"):
        print(k, res[k], flush=True)
    res["elapsed_s"] = time.perf_counter() - t0
    save_json(args.out / "local_fit.json", res)
    publish(tables, args)
    return res


if __name__ == "__main__":
    main()
