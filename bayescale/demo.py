"""The demo: fit Chinchilla's L(N, D) to the runs below 1e21 FLOP and predict the 23 larger runs.

Uses the bundled Epoch AI re-extraction of Hoffmann et al. 2022 (no network, no ``../shared``). Prints one row per
held-out run (median, 50% and 90% band of a new run, observed loss, inside?), the coverage, and saves a plot and
a JSON summary to ``out_dir``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayescale import datasets, scoring
from bayescale.fit import fit as fit_law
from bayescale.runs import default_cost

CUTOFF = 1e21


def plot_demo(train, test, bands, guide=None, title: str = "", ax=None):
    """The demo's figure, loss against training compute C: each held-out run's prediction at its own (N, D)
    (``bands``, rows in the order of ``test``: median, 50% and 90% bars of a new run) beside its observed loss, the
    fitted runs, and ``guide`` = (C, median) along D = 20 N as a dashed line (the law's shape only: the held-out runs
    have other tokens per parameter). Returns the Axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.6))
    if guide is not None:
        ax.plot(*guide, color="0.55", ls="--", lw=1, label="median along D = 20 N (guide only)")
    ax.scatter(train["C"], train["loss"], s=8, color="C1", label=f"fitted runs (C < {CUTOFF:.0e})")
    c, med = test["C"].to_numpy(), bands["run_median"].values
    ratio = test["D"] / test["N"]
    where = f"at each held-out run's own (N, D), D/N {ratio.min():.0f}-{ratio.max():.0f}"
    for lv, width, alpha in ((0.9, 1.2, 0.45), (0.5, 3.5, 0.8)):
        lo, hi = bands.interval(lv)
        ax.errorbar(c, med, yerr=[med - lo, hi - med], fmt="none", ecolor="C0", elinewidth=width, alpha=alpha,
                    label=f"{lv:.0%} band {where}")
    ax.plot(c, med, "o", color="C0", ms=3, label="predicted median")
    ax.scatter(c, test["loss"], s=18, marker="x", color="k", zorder=3, label="held-out runs (observed)")
    ax.axvline(CUTOFF, color="grey", ls=":", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="training compute C (FLOP)", ylabel="loss", title=title)
    ax.legend(fontsize=7)
    return ax


def run_demo(out_dir="out", seed: int = 0, quick: bool = False) -> dict:
    import matplotlib  # here, not at import: the Agg backend is set for the demo only (it writes files)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = datasets.chinchilla()
    train, test = runs[runs["C"] < CUTOFF], runs[runs["C"] >= CUTOFF].sort_values("C")
    print(f"Chinchilla runs (Epoch AI re-extraction): {len(train)} with C < {CUTOFF:.0e} FLOP to fit, "
          f"{len(test)} larger runs to predict.")
    t0 = time.perf_counter()
    n = 300 if quick else 1000
    fit = fit_law(train, "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", warmup=n, samples=n, seed=seed)
    secs = time.perf_counter() - t0
    d = fit.diagnostics
    print(f"NUTS: 4 chains x ({n} warm-up + {n} draws) in {secs:.1f} s; max r-hat {d['max_rhat']:.4f}, "
          f"min bulk ESS {d['min_ess_bulk']:.0f}, divergences {d['divergences']} -> {'OK' if fit.ok else 'NOT OK'}")
    for w in fit.warnings:
        print(f"  warning: {w}")
    nat = fit.summary().filter(like="published form", axis=0)[["mean", "q5", "q95"]]
    print("\nPosterior of the published parameters (mean, 90% interval):")
    for name, row in nat.iterrows():
        print(f"  {name.split()[0]:>6} = {row['mean']:.4g}  [{row['q5']:.4g}, {row['q95']:.4g}]")

    bands = fit.predict(test[["N", "D"]], levels=(0.5, 0.9), seed=seed)
    table = bands.table(observed=test["loss"].to_numpy())
    table.insert(2, "C", test["C"].to_numpy())
    show = pd.DataFrame({
        "N": table["N"].map("{:.3g}".format), "D": table["D"].map("{:.3g}".format),
        "C": table["C"].map("{:.3g}".format), "median": table["median"].round(3),
        "50% band": [f"[{a:.3f}, {b:.3f}]" for a, b in zip(table["lo50"], table["hi50"])],
        "90% band": [f"[{a:.3f}, {b:.3f}]" for a, b in zip(table["lo90"], table["hi90"])],
        "observed": table["observed"].round(3), "in 50%": table["in50"], "in 90%": table["in90"],
    })
    print("\nPredictions for the runs above 1e21 FLOP (bands of a new run, noise included):")
    print(show.to_string(index=False))
    cov50, cov90 = float(table["in50"].mean()), float(table["in90"].mean())
    rmsle = float(scoring.rmsle(table["median"].to_numpy(float), table["observed"].to_numpy(float)))
    print(f"\nCoverage: 50% band {cov50:.0%} ({int(table['in50'].sum())}/{len(table)}), "
          f"90% band {cov90:.0%} ({int(table['in90'].sum())}/{len(table)}); RMSLE of the median {rmsle:.4f}")
    raw_b = fit.predict(test[["N", "D"]], levels=(0.5, 0.9), seed=seed, raw=True)
    raw_cov50, raw_cov90 = (float(raw_b.covers(test["loss"].to_numpy(), lv).mean()) for lv in (0.5, 0.9))
    print(f"These bands carry the default extrapolation error, learned from real curves and this fit's own runs: "
          f"{bands.attrs['extrapolation_error']}.\nThe raw posterior (predict(..., raw=True)) would cover "
          f"{raw_cov50:.0%} (50% band) and {raw_cov90:.0%} (90% band).")
    # The law cannot see how far the real curve bends away from it beyond the data: calibrate that error on the
    # fitted runs alone (refit without the largest quarter, predict it), never on the runs being predicted.
    cal = fit.calibrate(holdout=0.25, warmup=n, samples=n)
    cal_b = cal.predict(test[["N", "D"]], levels=(0.5, 0.9), seed=seed)
    obs = test["loss"].to_numpy()
    cal_cov50, cal_cov90 = (float(cal_b.covers(obs, lv).mean()) for lv in (0.5, 0.9))
    ll_raw = float(fit.log_predictive_density(test[["N", "D"]], obs, seed=seed, raw=True).mean())
    ll_def = float(fit.log_predictive_density(test[["N", "D"]], obs, seed=seed).mean())
    ll_cal = float(cal.log_predictive_density(test[["N", "D"]], obs, seed=seed).mean())
    print(f"With the extrapolation error calibrated on the fitted runs (tau = {cal.discrepancy:.3f} ln-units per "
          f"decade beyond them): coverage 50% band {cal_cov50:.0%}, 90% band {cal_cov90:.0%}; mean log density of "
          f"the held-out runs {ll_cal:.3f} (default {ll_def:.3f}, raw posterior {ll_raw:.3f}).")
    # The law holds better near the runs to predict than among the smallest runs: refit it locally around them, each
    # run carrying tau x its distance in decades from them (Fit.localize).
    loc = cal.localize(test[["N", "D"]], warmup=n, samples=n)
    loc_b = loc.predict(test[["N", "D"]], levels=(0.5, 0.9), seed=seed)
    loc_cov50, loc_cov90 = (float(loc_b.covers(obs, lv).mean()) for lv in (0.5, 0.9))
    loc_rmsle = float(scoring.rmsle(loc_b["run_median"].values, obs))
    ll_loc = float(loc.log_predictive_density(test[["N", "D"]], obs, seed=seed).mean())
    print(f"Fitted locally around the runs to predict (each fitted run carries {cal.discrepancy:.3f} x its distance "
          f"in decades from them; its own extrapolation error, re-estimated the same way, {loc.discrepancy:.3f}): "
          f"RMSLE of the median {loc_rmsle:.4f}, coverage 50% band {loc_cov50:.0%}, 90% band {loc_cov90:.0%}; mean "
          f"log density {ll_loc:.3f}.")

    # the law's shape beyond the runs, as a guide: the held-out runs sit at their own D/N, predicted there below
    grid = np.geomspace(runs["C"].min(), runs["C"].max() * 3, 80)
    nn = np.sqrt(grid / default_cost(1.0, 20.0))  # N of D = 20 N at compute C: C = cost(1, 20) N^2
    guide = fit.predict({"N": nn, "D": 20 * nn}, levels=(0.5, 0.9), seed=seed)["run_median"].values
    ax = plot_demo(train, test, bands, guide=(grid, guide),
                   title=f"Chinchilla L(N,D) fitted below 1e21 FLOP: 90% coverage {cov90:.0%}")
    fig = ax.figure
    fig.tight_layout()
    png = out / "demo_chinchilla.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    result = {"fit_seconds": secs, "n_fit": len(train), "n_predict": len(test), "coverage50": cov50,
              "coverage90": cov90, "rmsle": rmsle, "max_rhat": d["max_rhat"], "min_ess_bulk": d["min_ess_bulk"],
              "divergences": d["divergences"], "ok": fit.ok, "log_density": ll_def,
              "raw": {"coverage50": raw_cov50, "coverage90": raw_cov90, "log_density": ll_raw},
              "extrapolation_error": bands.attrs["extrapolation_error"],
              "calibrated": {"tau_per_decade": cal.discrepancy, "coverage50": cal_cov50, "coverage90": cal_cov90,
                             "log_density": ll_cal},
              "local": {"tau": loc.discrepancy, "rmsle": loc_rmsle, "coverage50": loc_cov50, "coverage90": loc_cov90, "log_density": ll_loc},
              "predictions": json.loads(table.to_json(orient="records"))}
    (out / "demo_chinchilla.json").write_text(json.dumps(result, indent=2))
    print(f"Saved {png} and {out / 'demo_chinchilla.json'}")
    return result
