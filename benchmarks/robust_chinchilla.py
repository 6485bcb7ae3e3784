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


def isoflop_optima(runs) -> list[dict]:
    """Per isoFLOP profile with a convex parabola whose minimum lies inside its sizes: budget (geometric mean of
    the runs' C), the parabola's N*, the number of runs."""
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


def run(seed: int, draws: int) -> list[dict]:
    import bayescale as bs
    from bayescale import scoring

    runs = bs.datasets.chinchilla()
    train, test = runs[runs.C < CUTOFF], runs[runs.C >= CUTOFF]
    at, y = test[["N", "D"]], test["loss"].to_numpy()
    profiles = isoflop_optima(runs)
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
            iso = bs.compute_optimal(g, [p["C"] for p in profiles], levels=(0.8,), seed=seed)
            n_lo, n_hi = iso["N_opt_lower"].values[0], iso["N_opt_upper"].values[0]
            checks = [{**p, "N_median": float(m_), "N_lower": float(a_), "N_upper": float(b_),
                       "inside": bool(a_ <= p["N_parabola"] <= b_)}
                      for p, m_, a_, b_ in zip(profiles, iso["N_opt_median"].values, n_lo, n_hi)]
            tpp = opt["tokens_per_param_median"].values
            lo, hi = opt["tokens_per_param_lower"].values[0], opt["tokens_per_param_upper"].values[0]
            rows.append({
                "likelihood": lik, "error": kind, "ok": bool(f.ok), "fit_seconds": secs,
                "alpha": float(nat.filter(like="alpha").iloc[0]), "beta": float(nat.filter(like="beta").iloc[0]),
                "coverage50": float(b.covers(y, 0.5).mean()), "coverage90": float(b.covers(y, 0.9).mean()),
                "rmsle": float(scoring.rmsle(b["run_median"].values, y)),
                "ll": float(g.log_predictive_density(at, y, seed=seed).mean()),
                "tpp": {f"{c:.0e}": [float(m), float(lo_), float(hi_)] for c, m, lo_, hi_ in zip(BUDGETS, tpp, lo, hi)},
                "error_text": b.attrs["extrapolation_error"], "isoflop": checks})
    return rows


def all_runs(seed: int, draws: int) -> list[dict]:
    """Each likelihood fitted to all the runs, as Besiroglu et al. 2024 fitted them (the same data): exponents and
    compute-optimal tokens per parameter (default extrapolation error). Nothing is held out: this compares
    allocations with the published robust fit, not predictions."""
    import bayescale as bs

    runs = bs.datasets.chinchilla()
    out = []
    for lik in LIKELIHOODS:
        f = bs.fit(runs, "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", likelihood=lik, seed=seed,
                   warmup=draws, samples=draws, progress=False)
        nat = f.summary().filter(like="published form", axis=0)["mean"]
        opt = bs.compute_optimal(f, list(BUDGETS), levels=(0.8,), seed=seed)
        lo, hi = opt["tokens_per_param_lower"].values[0], opt["tokens_per_param_upper"].values[0]
        out.append({"likelihood": lik, "ok": bool(f.ok), "alpha": float(nat.filter(like="alpha").iloc[0]),
                    "beta": float(nat.filter(like="beta").iloc[0]),
                    "tpp": {f"{c:.0e}": [float(m), float(a), float(b)]
                            for c, m, a, b in zip(BUDGETS, opt["tokens_per_param_median"].values, lo, hi)}})
    return out


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
    iso_head = ["likelihood", "extrapolation error", *(f"{p['profile']:.0e} ({'fit' if p['C'] < CUTOFF else 'beyond'})"
                                                       for p in res["results"][0]["isoflop"]), "inside, fit runs",
                "inside, beyond"]
    iso_rows = []
    for r in res["results"]:
        fit_in = [p["inside"] for p in r["isoflop"] if p["C"] < CUTOFF]
        far_in = [p["inside"] for p in r["isoflop"] if p["C"] >= CUTOFF]
        iso_rows.append([r["likelihood"], r["error"],
                         *(f"{p['N_median'] / 1e9:.2g} [{p['N_lower'] / 1e9:.2g}, {p['N_upper'] / 1e9:.2g}]"
                           f"{' ✓' if p['inside'] else ''}" for p in r["isoflop"]),
                         f"{sum(fit_in)}/{len(fit_in)}", f"{sum(far_in)}/{len(far_in)}"])
    iso_rows.append(["parabola per profile", "", *(f"{p['N_parabola'] / 1e9:.2g} ({p['n_runs']} runs)"
                                                   for p in res["results"][0]["isoflop"]), "", ""])
    iso_source = (f"the fits above; N* in billions of parameters, posterior median [80% interval] at each profile's "
                  f"compute, ✓ where the interval contains the optimum of a parabola of ln loss in ln N fitted to that "
                  f"profile's runs (runs within {PROFILE_WIDTH} decade of Hoffmann et al.'s budgets); {shown(path)}")
    tables_ = [Table("robust_chinchilla", m["command"], source, head, rows),
               Table("isoflop_chinchilla", m["command"], iso_source, iso_head, iso_rows)]
    if res.get("all_runs"):
        all_head = ["likelihood", "alpha", "beta", *(f"D*/N* at {c} (80%)" for c in res["all_runs"][0]["tpp"])]
        all_rows = [[r["likelihood"], f"{r['alpha']:.3f}", f"{r['beta']:.3f}",
                     *(f"{v[0]:.1f} [{v[1]:.1f}, {v[2]:.1f}]" for v in r["tpp"].values())] for r in res["all_runs"]]
        all_rows.append(["Besiroglu et al. 2024 (Huber loss, published)", "0.348", "0.366", "about 20", "", ""])
        all_source = (f"chinchilla law fitted to all {res['n_fit'] + res['n_test']} runs (the data Besiroglu et al. "
                      f"fitted), 4 chains x ({res['draws']} + {res['draws']}), default extrapolation error; "
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
