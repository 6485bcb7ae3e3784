"""The stacking average against its members beyond the runs (issue 16: "never worse than its best member on RMSLE
by more than one standard error").

Per curve, every family is fitted with NUTS (default extrapolation error) and averaged by
:func:`bayescale.model_average` with its default weights (stacking of leave-future-out scores) and with PSIS-LOO
weights; each is scored at the curve's held-out runs: RMSLE of the median, 90% coverage, log density.

- ``revisiting``: up to ``--per-domain`` curves per domain of Alabdulmohsin et al. 2022 (official split): M2, M3, M4,
  BNSL1;
- ``chinchilla``: fit compute < 1e21 FLOP, predict the 23 larger runs: chinchilla, kaplan;
- ``gadre``: per corpus, fit N <= 411M, predict the 1.4B and 6.9B runs' loss: chinchilla, kaplan.

Per suite, "worse than the best member" compares the average's mean RMSLE with the family of lowest mean RMSLE on
that suite (known only afterwards: the average does not know it) by the paired difference over curves and its
standard error.

    python -m benchmarks.stacking [--per-domain 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from benchmarks._common import Table, command_line, load_json, machine_info, output_args, publish, save_json, shown

NUTS = dict(chains=4, warmup=300, samples=300)
FAMILIES = {"revisiting": ("M2", "M3", "M4", "BNSL1"), "chinchilla": ("chinchilla", "kaplan"),
            "gadre": ("chinchilla", "kaplan")}  # laws in N and D (overtrain is in C, M: not averaged with them)
CUTOFF = 1e21
AVERAGES = {"lfo": "average (lfo)", "loo": "average (loo)"}  # model_average's ic -> the method's name


def curves(per_domain: int) -> list[dict]:
    """(suite, curve, inputs, ctx, tgt) of every curve scored."""
    import bayescale as bs

    out = []
    r = bs.datasets.revisiting()
    seen: dict = {}
    for c, d in r.groupby("curve", sort=True):
        dom = d["domain"].iloc[0]
        seen[dom] = seen.get(dom, 0) + 1
        if seen[dom] <= per_domain:
            d = d.sort_values("x")
            out.append(dict(suite="revisiting", curve=f"{dom}/{c}", inputs={"x": "x"}, ctx=d[d.train], tgt=d[~d.train]))
    ch = bs.datasets.chinchilla().rename(columns={"loss": "y"})
    out.append(dict(suite="chinchilla", curve="chinchilla", inputs={"N": "N", "D": "D"}, ctx=ch[ch.C < CUTOFF],
                    tgt=ch[ch.C >= CUTOFF]))
    g = bs.datasets.gadre_downstream()
    for corpus, d in g.groupby("dataset", sort=True):
        small = d["N"] <= 4.2e8
        loss = d[["N", "D", "loss"]].rename(columns={"loss": "y"})
        out.append(dict(suite="gadre", curve=corpus, inputs={"N": "N", "D": "D"}, ctx=loss[small], tgt=loss[~small]))
    return out


def score(model, tgt: pd.DataFrame, names: list, seed: int) -> dict:
    from bayescale import scoring

    y = tgt["y"].to_numpy(float)
    b = model.predict(tgt[names], levels=(0.9,), seed=seed)
    return {"rmsle": float(scoring.rmsle(b["run_median"].values, y)), "cov90": float(b.covers(y, 0.9).mean()),
            "ll": float(np.mean(model.log_predictive_density(tgt[names], y, seed=seed)))}


def run(per_domain: int, seed: int) -> list[dict]:
    import bayescale as bs

    rows = []
    for c in curves(per_domain):
        t0 = time.perf_counter()
        names = list(c["inputs"])
        fits = {law: bs.fit(c["ctx"], law, inputs=c["inputs"], y="y", seed=seed, progress=False, **NUTS)
                for law in FAMILIES[c["suite"]]}
        row = {"suite": c["suite"], "curve": c["curve"], "methods": {}, "weights": {}}
        for law, f in fits.items():
            row["methods"][law] = score(f, c["tgt"], names, seed)
        for ic, name in AVERAGES.items():
            try:
                avg = bs.model_average(fits, ic=ic, seed=seed)
            except ValueError as exc:  # too few runs to hold out for leave-future-out
                print(f"  {c['curve']}: no {ic} average ({exc})", file=sys.stderr)
                continue
            row["methods"][name] = score(avg, c["tgt"], names, seed)
            row["weights"][ic] = avg.weights
        rows.append(row)
        print(f"{c['suite']} {c['curve']}: {time.perf_counter() - t0:.0f} s "
              + ", ".join(f"{k} {v['rmsle']:.4f}" for k, v in row["methods"].items()), file=sys.stderr, flush=True)
    return rows


def summary(rows: list[dict]) -> dict:
    """Per suite: each method's mean RMSLE, its se, coverage and log density; the best member; the averages'
    paired RMSLE difference to it and its se."""
    out, ic_of = {}, {name: ic for ic, name in AVERAGES.items()}
    for suite in dict.fromkeys(r["suite"] for r in rows):
        rs = [r for r in rows if r["suite"] == suite]
        methods = [m for m in rs[0]["methods"] if all(m in r["methods"] for r in rs)]
        per = {m: np.array([r["methods"][m]["rmsle"] for r in rs]) for m in methods}
        members = [m for m in methods if m not in ic_of]
        best = min(members, key=lambda m: per[m].mean())
        se = lambda v: float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")  # noqa: E731
        out[suite] = {"curves": len(rs), "best": best, "methods": {
            m: {"rmsle": float(per[m].mean()), "se": se(per[m]),
                "cov90": float(np.mean([r["methods"][m]["cov90"] for r in rs])),
                "ll": float(np.mean([r["methods"][m]["ll"] for r in rs])),
                "vs_best": float((per[m] - per[best]).mean()), "vs_best_se": se(per[m] - per[best]),
                "weight": ({k: float(np.mean([r["weights"][ic_of[m]].get(k, 0) for r in rs])) for k in members}
                           if m in ic_of else None)} for m in methods}}
    return out


def tables(out):
    path = out / "stacking.json"
    if not path.exists():
        return []
    res = load_json(path)
    head = ["suite", "method", "curves", "RMSLE ± se", "minus best member ± se", "within 1 se of the best", "cov 90%",
            "log density", "mean weights"]
    rows = []
    for suite, s in res["summary"].items():
        for m, v in s["methods"].items():
            diff = f"{v['vs_best']:+.4f} ± {v['vs_best_se']:.4f}" if m != s["best"] else "(best member)"
            ok = "" if m not in AVERAGES.values() else (
                "one curve: no se" if not np.isfinite(v["vs_best_se"]) else "yes" if v["vs_best"] <= v["vs_best_se"]
                else "no")
            w = ", ".join(f"{k} {x:.2f}" for k, x in v["weight"].items()) if v["weight"] else ""
            rows.append([suite, m, s["curves"], f"{v['rmsle']:.4f} ± {v['se']:.4f}", diff, ok, f"{v['cov90']:.2f}",
                         f"{v['ll']:.3f}", w])
    source = (f"NUTS {NUTS['chains']} chains x ({NUTS['warmup']} + {NUTS['samples']}) per family and curve, default "
              f"extrapolation error; up to {res['per_domain']} revisiting curves per domain; {shown(path)}")
    return [Table("stacking", res["machine"]["command"], source, head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stacking", description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-domain", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("stacking", argv))
    rows = run(args.per_domain, args.seed)
    save_json(args.out / "stacking.json", {"machine": meta, "per_domain": args.per_domain, "rows": rows,
                                           "summary": summary(rows)})
    publish(tables, args)


if __name__ == "__main__":
    main()
