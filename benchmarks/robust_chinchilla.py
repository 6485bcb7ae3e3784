"""Robust and honest on the Chinchilla runs: the lognormal and Student-t likelihoods, each with the default
extrapolation error and raw, scored on the 23 runs >= 1e21 FLOP (fit on the 222 below), and their compute-optimal
tokens per parameter at 1e22-1e24 FLOP (robust fits of the same data find about 20: Besiroglu et al. 2024).

The isoFLOP check (issue 16): the Chinchilla runs come from isoFLOP profiles, so runs of several sizes share a
budget. Runs within 0.1 decade of one of the paper's nine budgets form a profile; a parabola of ln loss in ln N fitted
to a profile's runs gives its measured optimum (kept when convex with its minimum inside the profile's sizes), and the
check asks whether the fit's 80% interval of N* at the profile's compute (geometric mean) contains it. Of the six
suites only the Chinchilla runs allow this: Gadre's runs are a grid of sizes x tokens-per-parameter (no two sizes at
one budget), the others are curves of one model each.

    python -m benchmarks.robust_chinchilla
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import Table, command_line, load_json, machine_info, output_args, publish, save_json, shown

LIKELIHOODS = ("lognormal", "studentt", "logstudentt")
BUDGETS = (1e22, 1e23, 1e24)
CUTOFF = 1e21
PROFILES = (6e18, 1e19, 3e19, 6e19, 1e20, 3e20, 6e20, 1e21, 3e21)  # Hoffmann et al. 2022's isoFLOP budgets
PROFILE_WIDTH = 0.1  # decades of compute around a budget that count as on its profile


def reference_optima(runs) -> list[dict]:
    """The check's reference, apart from the package's own :func:`bayescale.decisions.isoflop.isoflop_optima`: per
    isoFLOP profile (runs near one of the paper's budgets) with a convex parabola whose minimum lies inside its
    sizes: budget (geometric mean of the runs' C), the parabola's N*, the number of runs."""
    lc = np.log10(runs["C"].to_numpy(float))
    k = np.abs(lc[:, None] - np.log10(PROFILES)[None, :]).argmin(axis=1)
    out = []
    for j, budget in enumerate(PROFILES):
        g = runs[(k == j) & (np.abs(lc - np.log10(budget)) < PROFILE_WIDTH)]
        ln_n = np.log(g["N"].to_numpy(float))
        if len(g) < 5 or len(np.unique(ln_n)) < 3:
            continue
        c2, c1, _ = np.polyfit(ln_n, np.log(g["loss"].to_numpy(float)), 2)
        n_opt = np.exp(-c1 / (2 * c2)) if c2 > 0 else np.nan
        if np.isfinite(n_opt) and ln_n.min() <= np.log(n_opt) <= ln_n.max():
            out.append({"profile": budget, "C": float(np.exp(np.log(g["C"]).mean())), "n_runs": int(len(g)),
                        "N_parabola": float(n_opt)})
    return out


def _on_profile(runs, budget: float) -> np.ndarray:
    from bayescale.runs import default_cost

    lc = np.log10(default_cost(runs["N"].to_numpy(float), runs["D"].to_numpy(float)))
    return np.abs(lc - np.log10(budget)) < PROFILE_WIDTH


def allocation(f, profiles: list[dict], seed: int) -> list[dict]:
    """Tokens per parameter at :data:`BUDGETS` and the isoFLOP check, for the law's optimum (``profiles=None``) and
    for the default (checked by the isoFLOP profiles among the fitted runs). Each fitted profile is checked against
    the optimum corrected by the other profiles only (leave-one-profile-out); the profile beyond the fitted runs by
    all of them."""
    import bayescale as bs

    out = []
    for name, use in (("law's optimum", None), ("checked by isoFLOP profiles", "auto")):
        opt = bs.compute_optimal(f, list(BUDGETS), levels=(0.8,), seed=seed, profiles=use)
        checks = []
        for p in profiles:
            others = use if use is None or p["C"] >= CUTOFF else f.runs[~_on_profile(f.runs, p["profile"])]
            iso = bs.compute_optimal(f, [p["C"]], levels=(0.8,), seed=seed, profiles=others)
            m_, a_, b_ = (float(iso[f"N_opt_{k}"].values.ravel()[0]) for k in ("median", "lower", "upper"))
            checks.append({**p, "N_median": m_, "N_lower": a_, "N_upper": b_,
                           "inside": bool(a_ <= p["N_parabola"] <= b_), "optimum": iso.attrs["optimum"]})
        tpp = opt["tokens_per_param_median"].values
        lo, hi = opt["tokens_per_param_lower"].values[0], opt["tokens_per_param_upper"].values[0]
        out.append({"optimum": name, "note": opt.attrs["optimum"], "isoflop": checks,
                    "tpp": {f"{c:.0e}": [float(m), float(lo_), float(hi_)]
                            for c, m, lo_, hi_ in zip(BUDGETS, tpp, lo, hi)}})
    return out


def run(seed: int, draws: int) -> list[dict]:
    import bayescale as bs
    from bayescale import scoring

    runs = bs.datasets.chinchilla()
    train, test = runs[runs.C < CUTOFF], runs[runs.C >= CUTOFF]
    at, y = test[["N", "D"]], test["loss"].to_numpy()
    profiles = reference_optima(runs)
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
            rows.append({
                "likelihood": lik, "error": kind, "ok": bool(f.ok), "fit_seconds": secs,
                "alpha": float(nat.filter(like="alpha").iloc[0]), "beta": float(nat.filter(like="beta").iloc[0]),
                "coverage50": float(b.covers(y, 0.5).mean()), "coverage90": float(b.covers(y, 0.9).mean()),
                "rmsle": float(scoring.rmsle(b["run_median"].values, y)),
                "ll": float(g.log_predictive_density(at, y, seed=seed).mean()),
                "error_text": b.attrs["extrapolation_error"],
                "allocation": allocation(g, profiles, seed) if kind == "default" else None})
    return rows


def all_runs(seed: int, draws: int) -> list[dict]:
    """Each likelihood fitted to all the runs, as Besiroglu et al. 2024 fitted them (the same data): exponents and
    compute-optimal tokens per parameter (default extrapolation error), the law's optimum and the default (checked
    by the isoFLOP profiles). Nothing is held out: this compares allocations with the published robust fit, not
    predictions."""
    import bayescale as bs

    runs = bs.datasets.chinchilla()
    out = []
    for lik in LIKELIHOODS:
        f = bs.fit(runs, "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", likelihood=lik, seed=seed,
                   warmup=draws, samples=draws, progress=False)
        nat = f.summary().filter(like="published form", axis=0)["mean"]
        row = {"likelihood": lik, "ok": bool(f.ok), "alpha": float(nat.filter(like="alpha").iloc[0]),
               "beta": float(nat.filter(like="beta").iloc[0])}
        for key, use in (("tpp_law", None), ("tpp", "auto")):
            opt = bs.compute_optimal(f, list(BUDGETS), levels=(0.8,), seed=seed, profiles=use)
            lo, hi = opt["tokens_per_param_lower"].values[0], opt["tokens_per_param_upper"].values[0]
            row[key] = {f"{c:.0e}": [float(m), float(a), float(b)]
                        for c, m, a, b in zip(BUDGETS, opt["tokens_per_param_median"].values, lo, hi)}
        out.append(row)
    return out


def _tpp(v) -> str:
    return f"{v[0]:.1f} [{v[1]:.1f}, {v[2]:.1f}]"


def tables(out):
    path = out / "robust_chinchilla.json"
    if not path.exists():
        return []
    res = load_json(path)
    m = res["machine"]
    head = ["likelihood", "extrapolation error", "alpha", "beta", "cov 50%", "cov 90%", "RMSLE", "log density"]
    rows = [[r["likelihood"], r["error"], f"{r['alpha']:.3f}", f"{r['beta']:.3f}", f"{r['coverage50']:.2f}",
             f"{r['coverage90']:.2f}", f"{r['rmsle']:.4f}", f"{r['ll']:.3f}"] for r in res["results"]]
    source = (f"chinchilla law, 4 chains x ({res['draws']} warm-up + {res['draws']} draws), fit on the {res['n_fit']} "
              f"runs below {CUTOFF:.0e} FLOP, scored on the {res['n_test']} above; published-form posterior means; "
              f"{shown(path)}")
    allocs = [(r["likelihood"], a) for r in res["results"] if r.get("allocation") for a in r["allocation"]]
    first = allocs[0][1]
    al_head = ["likelihood", "N*", *(f"D*/N* at {c} (80%)" for c in first["tpp"]),
               "isoFLOP optimum inside the 80% interval: fitted profiles (each left out)", "profile beyond the runs"]
    iso_head = ["likelihood", "N*", *(f"{p['profile']:.0e} ({'fit' if p['C'] < CUTOFF else 'beyond'})"
                                      for p in first["isoflop"])]
    al_rows, iso_rows = [], []
    for lik, a in allocs:
        fit_in = [p["inside"] for p in a["isoflop"] if p["C"] < CUTOFF]
        far_in = [p["inside"] for p in a["isoflop"] if p["C"] >= CUTOFF]
        al_rows.append([lik, a["optimum"], *(_tpp(v) for v in a["tpp"].values()), f"{sum(fit_in)}/{len(fit_in)}",
                        f"{sum(far_in)}/{len(far_in)}"])
        iso_rows.append([lik, a["optimum"],
                         *(f"{p['N_median'] / 1e9:.2g} [{p['N_lower'] / 1e9:.2g}, {p['N_upper'] / 1e9:.2g}]"
                           f"{' ✓' if p['inside'] else ''}" for p in a["isoflop"])])
    iso_rows.append(["parabola per profile", "", *(f"{p['N_parabola'] / 1e9:.2g} ({p['n_runs']} runs)"
                                                   for p in first["isoflop"])])
    al_source = (f"the fits above, default extrapolation error; `compute_optimal(fit, budgets, profiles=None)` (the "
                 f"law's optimum) and its default `profiles='auto'` (the law's N* corrected by the isoFLOP profiles "
                 f"among the fitted runs, `bayescale.decisions.isoflop`); a fitted profile is checked with the "
                 f"correction learned from the other profiles only; {shown(path)}")
    iso_source = (f"the same; N* in billions of parameters, posterior median [80% interval] at each profile's "
                  f"compute, ✓ where the interval contains the optimum of a parabola of ln loss in ln N fitted to "
                  f"that profile's runs (runs within {PROFILE_WIDTH} decade of Hoffmann et al.'s budgets); "
                  f"{shown(path)}")
    tables_ = [Table("robust_chinchilla", m["command"], source, head, rows),
               Table("allocation_chinchilla", m["command"], al_source, al_head, al_rows),
               Table("isoflop_chinchilla", m["command"], iso_source, iso_head, iso_rows)]
    if res.get("all_runs"):
        all_head = ["likelihood", "alpha", "beta", *(f"D*/N* at {c} (80%), {k}" for k in ("law's optimum", "default")
                                                     for c in res["all_runs"][0]["tpp"])]
        all_rows = [[r["likelihood"], f"{r['alpha']:.3f}", f"{r['beta']:.3f}",
                     *(_tpp(v) for k in ("tpp_law", "tpp") for v in r[k].values())] for r in res["all_runs"]]
        all_rows.append(["Besiroglu et al. 2024 (Huber loss, published)", "0.348", "0.366", "about 20", "", "", "",
                         "", ""])
        all_source = (f"chinchilla law fitted to all {res['n_fit'] + res['n_test']} runs (the data Besiroglu et al. "
                      f"fitted), 4 chains x ({res['draws']} + {res['draws']}), default extrapolation error; the law's "
                      f"optimum (`profiles=None`) and the default (checked by the runs' isoFLOP profiles); "
                      f"{shown(path)}")
        tables_.append(Table("chinchilla_all_runs", m["command"], all_source, all_head, all_rows))
    return tables_


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
                                                    "n_test": int((runs.C >= CUTOFF).sum()), "results": rows,
                                                    "all_runs": all_runs(args.seed, args.draws)})
    publish(tables, args)


if __name__ == "__main__":
    main()
