"""Test-time ensembling of the PFN over context views (issue 17), chosen on the real suites' fit splits only.

A real curve often has more runs than the network was trained to read (40 context points for ``small``); the PFN
then thins them away. :func:`bayescale.pfn.infer.context_views` makes several thinnings that together see every
run, and the predictive is their equal mixture. How many views to use is chosen here, never on a test split:

- *selection* (``fit`` rows): each curve's fit split only (revisiting's ``train`` runs, ColPret's context half,
  the first half of each datablations and multipower curve), cut in x at its ``CUT`` quantile: the runs below are the
  context, the ones above the targets (at most ``MAX_TGT``, log-spaced). The default number of views is the fewest
  whose log density of ln y, averaged over suites (each suite's mean over its curves), is within one standard error
  of the best's (:func:`choose`): each view costs one more pass of the network.
- *test* (``test`` rows): the suites' own splits (fit split -> held-out runs), reported for the chosen setting and
  for one view, with the default recalibration.

Both without the real-data extrapolation error (``error="raw"``), which ``benchmarks/pfn_error.py`` studies.

Metrics per curve, then averaged over a suite's curves: RMSLE of the median, mean log density of ln y (nats, unit
free: ``logpdf(y) + ln y``), coverage of the central 50% and 90% intervals, MSCE over 50-99%.

    python -m benchmarks.pfn_views [--views 1,2,4,8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from benchmarks._common import (Table, command_line, load_json, machine_info, output_args, publish, save_json, shown,
                                thin_log)

SUITES = ("revisiting", "colpret", "datablations", "multipower")
CUT = 0.7  # quantile of a fit split's ln x below which its runs are the selection context
MAX_TGT = 20
LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


def curves(suite: str) -> list[dict]:
    """(curve, fit split, held-out runs) of every curve of ``suite``, each a DataFrame with x and y."""
    import bayescale as bs

    if suite == "revisiting":
        r = bs.datasets.revisiting()
        parts = [(c, d[d.train], d[~d.train]) for c, d in r.groupby("curve", sort=True)]
    elif suite == "colpret":
        r = bs.datasets.colpret().rename(columns={"tokens": "x", "loss": "y"})
        parts = [(str(c), d[d.context], d[~d.context]) for c, d in r.groupby("curve", sort=True)]
    else:
        r = (bs.datasets.datablations().rename(columns={"tokens": "x", "loss": "y"}) if suite == "datablations"
             else bs.datasets.multipower().rename(columns={"step": "x", "loss": "y"}))
        parts = [(str(c), d[d.x <= d.x.max() / 2], d[d.x > d.x.max() / 2]) for c, d in r.groupby("curve", sort=True)]
    return [dict(curve=c, fit=f.sort_values("x")[["x", "y"]],
                 held=thin_log(h.sort_values("x")[["x", "y"]], "x", MAX_TGT))
            for c, f, h in parts]


def selection_task(fit: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The fit split cut at its ``CUT`` quantile of ln x (:func:`bayescale.pfn.error.split_context`, targets
    thinned to ``MAX_TGT``): (context, targets), or None if either is too small."""
    from bayescale.pfn.error import split_context

    cut = split_context(fit["x"].to_numpy(float), fit["y"].to_numpy(float), CUT, MAX_TGT)
    return None if cut is None else (fit.iloc[cut[0]], fit.iloc[cut[1]].reset_index(drop=True))


def score(pairs: list, views: int, error="raw", own_errors: bool = True) -> list[dict]:
    """Per curve: RMSLE, log density of ln y, coverage at each level, for ``(context, targets)`` pairs (the PFN with
    ``views``, ``error`` and ``own_errors``)."""
    from bayescale.pfn import predictive_many

    preds = predictive_many([(c["x"].to_numpy(float), c["y"].to_numpy(float), t["x"].to_numpy(float))
                             for c, t in pairs], views=views, error=error, own_errors=own_errors)
    out = []
    for p, (_, t) in zip(preds, pairs):
        y = t["y"].to_numpy(float)
        q = p.quantile(np.array([0.5, *[(1 - lv) / 2 for lv in LEVELS], *[(1 + lv) / 2 for lv in LEVELS]]))
        med, lo, hi = q[0], q[1:1 + len(LEVELS)], q[1 + len(LEVELS):]
        cov = ((lo <= y) & (y <= hi)).mean(axis=1)
        out.append({"rmsle": float(np.sqrt(np.mean((np.log(med) - np.log(y)) ** 2))),
                    "ll": float(np.mean(p.logpdf(y) + np.log(y))), "views": int(p.n_views),
                    **{f"cov{round(lv * 100)}": float(c) for lv, c in zip(LEVELS, cov)}})
    return out


def summarize(rows: list[dict]) -> dict:
    se = lambda v: float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")  # noqa: E731
    cov = {lv: float(np.mean([r[f"cov{round(lv * 100)}"] for r in rows])) for lv in LEVELS}
    return {"curves": len(rows), "rmsle": float(np.mean([r["rmsle"] for r in rows])),
            "rmsle_se": se([r["rmsle"] for r in rows]), "ll": float(np.mean([r["ll"] for r in rows])),
            "ll_se": se([r["ll"] for r in rows]), **{f"cov{round(lv * 100)}": c for lv, c in cov.items()},
            "msce": float(np.mean([(cov[lv] - lv) ** 2 for lv in LEVELS])),
            "mean_views": float(np.mean([r["views"] for r in rows])), "ll_curves": [r["ll"] for r in rows]}


def choose(selection: dict, options: list[int]) -> int:
    """The fewest views whose suite-averaged log density on the fit splits is within one standard error of the
    best's (the one-standard-error rule): each view is one more pass of the network, so more views must earn their
    cost. The standard error is that of the paired per-curve difference, suites averaged alike."""
    ll = {v: np.mean([selection[s][str(v)]["ll"] for s in selection]) for v in options}
    best = max(options, key=lambda v: ll[v])

    def se(v):
        d = [np.subtract(selection[s][str(v)]["ll_curves"], selection[s][str(best)]["ll_curves"]) for s in selection]
        return float(np.sqrt(sum(np.var(x, ddof=1) / len(x) for x in d if len(x) > 1)) / len(d))

    return min(v for v in options if ll[v] >= ll[best] - se(v))


def run(options: list[int]) -> dict:
    sel, test, secs = {}, {}, {}
    data = {s: curves(s) for s in SUITES}
    for s, cs in data.items():
        pairs = [p for p in (selection_task(c["fit"]) for c in cs) if p is not None]
        sel[s] = {}
        for v in options:
            t0 = time.perf_counter()
            sel[s][str(v)] = summarize(score(pairs, v))
            secs[f"{s}/{v}"] = time.perf_counter() - t0
            print(f"fit split {s} views {v}: {sel[s][str(v)]}", flush=True)
    best = choose(sel, options)
    for s, cs in data.items():
        pairs = [(c["fit"], c["held"]) for c in cs if len(c["held"]) and c["fit"]["x"].nunique() >= 3]
        test[s] = {str(v): summarize(score(pairs, v)) for v in sorted({1, best})}
        print(f"test {s}: {test[s]}", flush=True)
    return {"options": options, "chosen": best, "selection": sel, "test": test, "seconds": secs}


def tables(out):
    path = out / "pfn_views.json"
    res = load_json(path)
    if res is None:
        return []
    head = ["split", "suite", "views", "curves", "mean views used", "RMSLE ± se", "log density ln y ± se", "cov 50%",
            "cov 90%", "MSCE"]
    rows = []
    for split, key in (("fit (selection)", "selection"), ("test", "test")):
        for s, per in res[key].items():
            for v, m in per.items():
                mark = " (chosen)" if int(v) == res["chosen"] else ""
                rows.append([split, s, f"{v}{mark}", m["curves"], f"{m['mean_views']:.1f}",
                             f"{m['rmsle']:.4f} ± {m['rmsle_se']:.4f}", f"{m['ll']:.3f} ± {m['ll_se']:.3f}",
                             f"{m['cov50']:.2f}", f"{m['cov90']:.2f}", f"{m['msce']:.4f}"])
    source = (f"shipped PFN weights, recalibrated predictive without the extrapolation error; selection: each fit "
              f"split cut at its {CUT:.0%} quantile of ln x (targets thinned to {MAX_TGT}), views: the fewest within "
              f"one standard error of the best suite-averaged log density there ({res['chosen']}); test: the suites' "
              f"own held-out runs; {shown(path)}")
    return [Table("pfn_views", res["machine"]["command"], source, head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pfn_views", description=__doc__.split("\n\n")[0])
    ap.add_argument("--views", default="1,2,4,8", help="numbers of views to compare (default %(default)s)")
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("pfn_views", argv))
    res = run(sorted({int(v) for v in args.views.split(",")}))
    save_json(args.out / "pfn_views.json", {"machine": meta, **res})
    publish(tables, args)


if __name__ == "__main__":
    main()
