"""Robust and honest on the Chinchilla runs: the lognormal and Student-t likelihoods, each with the default
extrapolation error and raw, scored on the 23 runs >= 1e21 FLOP (fit on the 222 below), and their compute-optimal
tokens per parameter at 1e22-1e24 FLOP (robust fits of the same data find about 20: Besiroglu et al. 2024).

    python -m benchmarks.robust_chinchilla
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import Table, command_line, load_json, machine_info, output_args, publish, save_json, shown

LIKELIHOODS = ("lognormal", "studentt")
BUDGETS = (1e22, 1e23, 1e24)
CUTOFF = 1e21


def run(seed: int, draws: int) -> list[dict]:
    import bayescale as bs
    from bayescale import scoring

    runs = bs.datasets.chinchilla()
    train, test = runs[runs.C < CUTOFF], runs[runs.C >= CUTOFF]
    at, y = test[["N", "D"]], test["loss"].to_numpy()
    rows = []
    for lik in LIKELIHOODS:
        t0 = time.perf_counter()
        f = bs.fit(train, "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", likelihood=lik, seed=seed,
                   warmup=draws, samples=draws, progress=False)
        secs = time.perf_counter() - t0
        nat = f.summary().filter(like="published form", axis=0)["mean"]
        for kind in ("default", "raw"):
            g = f if kind == "default" else f.with_error(None)
            b = g.predict(at, levels=(0.5, 0.9), seed=seed)
            opt = bs.compute_optimal(g, list(BUDGETS), levels=(0.8,), seed=seed)
            tpp = opt["tokens_per_param_median"].values
            lo, hi = opt["tokens_per_param_lower"].values[0], opt["tokens_per_param_upper"].values[0]
            rows.append({
                "likelihood": lik, "error": kind, "ok": bool(f.ok), "fit_seconds": secs,
                "alpha": float(nat.filter(like="alpha").iloc[0]), "beta": float(nat.filter(like="beta").iloc[0]),
                "coverage50": float(b.covers(y, 0.5).mean()), "coverage90": float(b.covers(y, 0.9).mean()),
                "rmsle": float(scoring.rmsle(b["run_median"].values, y)),
                "ll": float(g.log_predictive_density(at, y, seed=seed).mean()),
                "tpp": {f"{c:.0e}": [float(m), float(lo_), float(hi_)] for c, m, lo_, hi_ in zip(BUDGETS, tpp, lo, hi)},
                "error_text": b.attrs["extrapolation_error"]})
    return rows


def tables(out):
    path = out / "robust_chinchilla.json"
    if not path.exists():
        return []
    res = load_json(path)
    m = res["machine"]
    head = ["likelihood", "extrapolation error", "alpha", "beta", "cov 50%", "cov 90%", "RMSLE", "log density",
            *(f"D*/N* at {c} (80%)" for c in res["results"][0]["tpp"])]
    rows = [[r["likelihood"], r["error"], f"{r['alpha']:.3f}", f"{r['beta']:.3f}", f"{r['coverage50']:.2f}",
             f"{r['coverage90']:.2f}", f"{r['rmsle']:.4f}", f"{r['ll']:.3f}",
             *(f"{v[0]:.1f} [{v[1]:.1f}, {v[2]:.1f}]" for v in r["tpp"].values())] for r in res["results"]]
    source = (f"chinchilla law, 4 chains x ({res['draws']} warm-up + {res['draws']} draws), fit on the {res['n_fit']} "
              f"runs below {CUTOFF:.0e} FLOP, scored on the {res['n_test']} above; published-form posterior means; "
              f"{shown(path)}")
    return [Table("robust_chinchilla", m["command"], source, head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.robust_chinchilla", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=1000)
    output_args(ap)
    args = ap.parse_args(argv)
    import bayescale as bs

    runs = bs.datasets.chinchilla()
    meta = machine_info(command_line("robust_chinchilla", argv))
    rows = run(args.seed, args.draws)
    save_json(args.out / "robust_chinchilla.json", {"machine": meta, "draws": args.draws,
                                                    "n_fit": int((runs.C < CUTOFF).sum()),
                                                    "n_test": int((runs.C >= CUTOFF).sum()), "results": rows})
    publish(tables, args)


if __name__ == "__main__":
    main()
