"""Command line: ``bayescale laws | fit | predict | compare | demo | next-runs | report``.

Tables go to stdout; ``--json`` prints machine-readable output instead. Bad input exits with status 2 and a
one-line ``error:`` message saying what to fix.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pandas as pd

import bayescale as bs
from bayescale.errors import BayescaleError
from bayescale.runs import read_runs


def _inputs(law, spec: str) -> dict:
    """``N,D`` (columns named like the inputs, in order) or ``N=params,D=tokens``."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if all("=" in p for p in parts):
        return dict(p.split("=", 1) for p in parts)
    if len(parts) != len(law.inputs):
        raise BayescaleError(f"law {law.name!r} has inputs {list(law.input_names)}; --x gave {parts}. "
                             f"Use --x {','.join(law.input_names)} or --x {law.input_names[0]}=<column>,...")
    return dict(zip(law.input_names, parts))


def _levels(spec: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in spec.split(","))
    except ValueError:
        raise BayescaleError(f"--levels must be numbers like 0.5,0.9, got {spec!r}") from None


def _print_table(df, as_json: bool, extra: dict | None = None):
    if as_json:
        print(json.dumps({**(extra or {}), "rows": json.loads(df.to_json(orient="records"))}, indent=2, default=float))
    else:
        with pd.option_context("display.width", 160, "display.max_columns", 30, "display.float_format", "{:.5g}".format):
            print(df.to_string())


def cmd_laws(args) -> int:
    rows = [{"name": law.name, "inputs": ",".join(law.input_names), "formula": law.formula,
             "parameters": ",".join(law.param_names), "min_points": law.needs_points,
             "y_range": f"[{law.y_range[0]:g}, {law.y_range[1]:g}]", "target_accept": law.target_accept,
             "description": law.description}
            for law in bs.list_laws()]
    _print_table(pd.DataFrame(rows).set_index("name") if not args.json else pd.DataFrame(rows), args.json)
    return 0


def _fit_kwargs(args, law) -> dict:
    kw = {"y": args.y, "likelihood": args.likelihood, "chains": args.chains, "warmup": args.warmup,
          "samples": args.samples, "seed": args.seed, "progress": not args.quiet and sys.stderr.isatty()}
    kw["inputs"] = _inputs(law, args.x)
    if getattr(args, "target_accept", None) is not None:
        kw["target_accept"] = args.target_accept
    if args.se:
        kw["se"] = args.se
    if args.lower or args.upper:
        kw["lower"], kw["upper"] = args.lower, args.upper
    return kw


def cmd_fit(args) -> int:
    law = bs.get_law(args.law)
    f = bs.fit(args.runs, law, group=args.group, **_fit_kwargs(args, law))
    fits = f if isinstance(f, dict) else {None: f}
    report = {}
    for g, one in fits.items():
        summ = one.summary()
        d = one.diagnostics
        report[str(g)] = {"law": law.name, "ok": one.ok, "warnings": one.warnings, "max_rhat": d["max_rhat"],
                          "min_ess_bulk": d["min_ess_bulk"], "divergences": d["divergences"],
                          "parameters": json.loads(summ[["mean", "sd", "q5", "q95"]].to_json(orient="index"))}
        if not args.json:
            head = f"law {law.name}: {law.formula}" + ("" if g is None else f"  [group {g}]")
            print(head)
            _print_table(summ, False)
            print(f"diagnostics: max r-hat {d['max_rhat']:.4f}, min bulk ESS {d['min_ess_bulk']:.0f}, "
                  f"divergences {d['divergences']} -> {'OK' if one.ok else 'NOT OK'}")
            for w in one.warnings:
                print(f"  warning: {w}")
        if args.out:
            out = args.out if g is None else args.out.replace(".nc", f"_{g}.nc")
            one.save(out)
            if not args.json:
                print(f"saved {out}")
    if args.json:
        print(json.dumps(report, indent=2, default=float))
    return 0


def _parse_local(value):
    """``--local``: None, 'auto' or a positive tau (ln units per decade)."""
    if value is None:
        return None
    try:
        local = "auto" if value.strip().lower() == "auto" else float(value)
    except ValueError:
        local = -1.0
    if local != "auto" and not (0 < local < float("inf")):
        raise BayescaleError(f"--local must be a positive number (ln-units of error per decade from the target) or "
                             f"'auto', got {value!r}")
    return local


def _localized(f, local, target, refit: dict):
    """``f`` refitted locally around ``target`` (``--local``): tau given, or calibrated by leave-future-out."""
    if local == "auto":
        f = f.calibrate(**refit)
        if f.discrepancy <= 0:
            raise BayescaleError("--local auto: leave-future-out on these runs found no extrapolation error (tau = 0); "
                                 "give --local TAU, or go without --local")
    return f.localize(target, tau=None if local == "auto" else local, **refit)


def cmd_predict(args) -> int:
    if args.method == "pfn":
        if args.local is not None:
            raise BayescaleError("--local refits a NUTS fit; it does not apply to --method pfn")
        return _predict_pfn(args)
    local = _parse_local(args.local)
    f = bs.load_fit(args.fit)
    if local is not None:
        st = f.settings
        f = _localized(f, local, args.at, {"chains": st.num_chains, "warmup": st.num_warmup,
                                           "samples": st.num_samples})
    bands = f.predict(args.at, levels=_levels(args.levels), seed=args.seed)
    if args.out:
        bands.to_netcdf(args.out)
    if args.json:
        print(json.dumps(bands.to_json(), indent=2, default=float))
    else:
        print(f"law {f.law.name} ({f.likelihood} noise); bands for a new run (noise included)"
              + ("" if f.local is None else f"; fitted locally around these points ({f.local['tau']:.3g} per decade "
                                            "of distance from them)"))
        _print_table(bands.table(), False)
        if not f.ok:
            print("warning: the fit's diagnostics failed: " + "; ".join(f.warnings))
    return 0


def _predict_pfn(args) -> int:
    from bayescale.pfn.infer import predict as pfn_predict  # defer heavy imports

    if not args.x:
        raise BayescaleError("--method pfn needs --x <column> (the one input) and --y <column>")
    res = pfn_predict(args.fit, x=args.x, y=args.y, at=args.at, levels=_levels(args.levels), group=args.group,
                      seed=args.seed or 0, weights=args.weights, calibrated=not args.raw)
    res = res if isinstance(res, dict) else {None: res}
    if args.out:
        for g, b in res.items():
            b.to_netcdf(args.out if g is None else args.out.replace(".nc", f"_{g}.nc".replace("/", "_")))
    if args.json:
        out = {str(g): b.to_json() for g, b in res.items()}
        print(json.dumps(out[str(None)] if None in res else out, indent=2, default=float))
        return 0
    for g, b in res.items():
        print(f"PFN ({b.attrs['pfn_weights']}); bands for a new run (noise included)" + ("" if g is None else f"  [group {g}]"))
        _print_table(b.table(), False)
    return 0


def cmd_pfn_train(args) -> int:
    from bayescale.pfn.train import train  # defer heavy imports

    prior = {k: v for k, v in (("bump_share", args.bump_share), ("wide_noise_share", args.wide_noise_share))
             if v is not None}
    fams = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
    info = train(args.config, steps=args.steps, max_minutes=args.max_minutes, out=args.out, resume=args.resume,
                 seed=args.seed, progress=not args.quiet, calibration_curves=args.calibration_curves,
                 families=fams, **prior)
    if info:
        print(f"best weights: {args.out}/{info['weights']} (step {info['step']}, validation NLL {info['val_nll']:.4f}, "
              f"{info['n_params']:,} parameters)")
    return 0


def cmd_pfn_calibrate(args) -> int:
    from bayescale.pfn.calibrate import fit_recalibration  # defer heavy imports

    fit_recalibration(args.weights, n_curves=args.curves, **({} if args.seed is None else {"seed": args.seed}))
    return 0


def cmd_compare(args) -> int:
    laws = [bs.get_law(n) for n in args.laws.split(",")]
    fits = {law.name: bs.fit(args.runs, law, **_fit_kwargs(args, law)) for law in laws}
    table = bs.compare(fits)
    _print_table(table.reset_index() if args.json else table, args.json)
    return 0


def cmd_demo(args) -> int:
    from bayescale.demo import run_demo  # defer heavy imports

    run_demo(out_dir=args.out, seed=args.seed, quick=args.quick)
    return 0


def _grid_axis(spec: str):
    """``N=1e8:1e10:5`` (5 log-spaced values) or ``N=1e8,3e8,1e9`` -> (name, values)."""
    from bayescale.decisions import parse_size  # defer heavy imports

    if "=" not in spec:
        raise BayescaleError(f"--grid {spec!r}: write NAME=LO:HI:COUNT (log-spaced) or NAME=V1,V2,...")
    name, vals = (t.strip() for t in spec.split("=", 1))
    if ":" in vals:
        parts = vals.split(":")
        if len(parts) != 3:
            raise BayescaleError(f"--grid {spec!r}: a range is LO:HI:COUNT, e.g. N=1e8:1e10:5")
        return name, np.geomspace(parse_size(parts[0]), parse_size(parts[1]), int(parts[2]))
    return name, [parse_size(v) for v in vals.split(",") if v.strip()]


def cmd_next_runs(args) -> int:
    from bayescale.decisions import SearchOptions, candidate_grid, next_runs, parse_target  # defer heavy imports

    law = bs.get_law(args.law)
    if args.horizon is not None and not (args.horizon > 0 and args.horizon < float("inf")):
        raise BayescaleError(f"--horizon must be a positive number (compute you expect to spend on pilot runs), got "
                             f"{args.horizon}")
    local = _parse_local(args.local)
    if local is not None and args.target.strip().lower().startswith("compute_optimal"):
        raise BayescaleError("--local needs a point or curve target (N=...,D=...), not compute_optimal")
    if bool(args.candidates) == bool(args.grid):
        raise BayescaleError("give the candidate runs either as --candidates FILE (CSV/Parquet) or as --grid "
                             "N=1e8:1e10:5 --grid D=1e9:1e11:5 (one per input)")
    if args.candidates:
        cands = read_runs(args.candidates)
    else:
        cands = candidate_grid(**dict(_grid_axis(g) for g in args.grid))
    kw = _fit_kwargs(args, law)
    f = bs.fit(args.runs, law, **kw)
    if local is not None:
        f = _localized(f, local, parse_target(args.target, law, f.columns)[1],
                       {k: kw[k] for k in ("chains", "warmup", "samples", "seed") if k in kw})
    search = SearchOptions(n_outcomes=args.outcomes, target_sd=args.target_sd, horizon=args.horizon)
    table = next_runs(f, cands, target=args.target, budget=args.budget, k=args.k, cost=args.cost, seed=args.seed,
                      search=search)
    if args.out:
        table.to_csv(args.out, index=False)
    if not args.json:
        print(f"target {args.target}: posterior sd of log {args.y} now {table.attrs['var_before'] ** 0.5:.4g}; "
              f"chosen batch ({int(table['chosen'].sum())} run(s), cost {table.attrs['batch_cost']:.4g}) first")
        if f.local is not None:
            print(f"local fit: runs and candidates carry an extra error of {f.local['tau']:.3g} per decade from the "
                  "target (ln units)")
        with pd.option_context("display.max_rows", args.show):
            _print_table(table.head(args.show), False)
        if "warning" in table.attrs:
            print("warning: " + table.attrs["warning"])
        if not f.ok:
            print("warning: the fit's diagnostics failed: " + "; ".join(f.warnings))
    else:
        _print_table(table, True, {"target": args.target, "var_before": table.attrs["var_before"],
                                   "fit_ok": f.ok, "warning": table.attrs.get("warning")})
    return 0


def cmd_report(args) -> int:
    from bayescale.decisions import risk_report  # defer heavy imports
    from bayescale.sampler import SamplerSettings  # defer heavy imports

    law = bs.get_law(args.law)
    if args.likelihood != "lognormal" or args.se or args.lower or args.upper:
        raise BayescaleError("report uses the default lognormal noise without measurement error columns")
    cands = None
    if args.candidates:
        cands = read_runs(args.candidates)
    # one setting for every family: by default the most careful of their own target_accept
    families = [args.law, *(args.laws.split(",") if args.laws else [])]
    accept = args.target_accept or max(bs.get_law(n.strip()).target_accept for n in families)
    sampler = SamplerSettings.for_law(law, args.chains, args.warmup, args.samples, target_accept=accept)
    rep = risk_report(args.runs, law, options=args.option, target_loss=args.target_loss, laws=args.laws,
                      inputs=_inputs(law, args.x), y=args.y, seed=args.seed, out=args.out, candidates=cands,
                      sampler=sampler)
    s = rep.summary
    if args.json:
        print(json.dumps(s, indent=2, default=float))
        return 0
    print(s["gate"]["text"])
    for lab, o in s["options"].items():
        print(f"{lab}: median {o['median']:.4f}, 80% [{o['lo80']:.4f}, {o['hi80']:.4f}], "
              f"P(loss <= {s['target_loss']:g}) = {o['p_meet']:.1%}, expected shortfall {o['expected_shortfall']:.4f}, "
              f"compute {o['compute']:.3g}")
    print(s["family_text"])
    print(s["next_run_text"])
    print("wrote " + ", ".join(str(p) for p in rep.files.values()))
    return 0


def _add_fit_args(p):
    p.add_argument("runs", help="CSV or Parquet file, one row per training run")
    p.add_argument("--x", required=True, help="input columns: 'N,D' (in the law's input order) or 'N=params,D=tokens'")
    p.add_argument("--y", default="loss", help="outcome column (default: loss)")
    p.add_argument("--se", help="column with the standard error of y")
    p.add_argument("--lower", help="column with the lower bound of a 95%% interval of y")
    p.add_argument("--upper", help="column with the upper bound of a 95%% interval of y")
    p.add_argument("--likelihood", default="lognormal", choices=["lognormal", "normal", "studentt"])
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target-accept", type=float, default=None,
                   help="NUTS target acceptance rate (default: the law's, see `bayescale laws`)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bayescale", description="Calibrated Bayesian extrapolation of scaling laws.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("laws", help="list the registered law families")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_laws)
    p = sub.add_parser("fit", help="fit a law with NUTS and save the posterior")
    p.add_argument("--law", required=True)
    p.add_argument("--group", help="column naming curves: fit each one (vectorised)")
    p.add_argument("--out", help="netCDF file for the fit (with --group: one file per group)")
    _add_fit_args(p)
    p.set_defaults(func=cmd_fit)
    p = sub.add_parser("predict", help="posterior predictive bands from a saved fit (or from runs with --method pfn)")
    p.add_argument("fit", help="netCDF file written by `bayescale fit --out`; with --method pfn, the runs CSV/Parquet")
    p.add_argument("--method", default="nuts", choices=["nuts", "pfn"],
                   help="nuts: from a saved fit (default); pfn: amortized PFN straight from the runs (one input x)")
    p.add_argument("--x", help="(--method pfn) the input column")
    p.add_argument("--y", default="loss", help="(--method pfn) the outcome column (default: loss)")
    p.add_argument("--group", help="(--method pfn) column naming curves: one set of bands per curve")
    p.add_argument("--weights", help="(--method pfn) a .npz written by `bayescale pfn train` (default: the bundled one)")
    p.add_argument("--raw", action="store_true", help="(--method pfn) the raw network's predictive, not recalibrated")
    p.add_argument("--at", required=True, help="query points, e.g. N=7e10,D=1.4e12 (';' separates several)")
    p.add_argument("--local", metavar="TAU", help="refit the law locally around the query points: each fitted run "
                   "carries an extra error TAU x its distance in decades from them (e.g. 0.1), or 'auto' (TAU by "
                   "leave-future-out on the runs)")
    p.add_argument("--levels", default="0.5,0.8,0.9,0.95")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", help="write the bands as netCDF")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)
    p = sub.add_parser("compare", help="fit several laws to the same runs and compare them with LOO")
    p.add_argument("--laws", required=True, help="comma-separated law names")
    _add_fit_args(p)
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("pfn", help="the amortized PFN extrapolator: `bayescale pfn train|calibrate`")
    pfn_sub = p.add_subparsers(dest="pfn_command", required=True)
    p = pfn_sub.add_parser("train", help="train the PFN on prior draws (checkpoints, resume, best weights)")
    p.add_argument("--config", default="small", choices=["tiny", "small", "base"],
                   help="small: 0.58M parameters, about an hour on 2 CPU cores; base: 4.3M, sized for a GPU")
    p.add_argument("--steps", type=int, help="training steps (default: the config's); sets the learning-rate schedule")
    p.add_argument("--max-minutes", type=float, help="stop after this much wall clock (the best weights are kept)")
    p.add_argument("--out", default="pfn_out", help="folder for weights, checkpoint and history (default: pfn_out)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--calibration-curves", type=int, default=4096,
                   help="prior curves per split for the recalibration map fitted at the end (0: skip; default 4096)")
    p.add_argument("--families", help="train on these prior families only (comma-separated; default: all)")
    p.add_argument("--bump-share", type=float, default=None, help="share of curves with a bump (default 0.15)")
    p.add_argument("--wide-noise-share", type=float, default=None,
                   help="share of curves whose noise is shrunk by up to 1.5 decades (default 0.5)")
    p.set_defaults(func=cmd_pfn_train)
    p = pfn_sub.add_parser("calibrate", help="fit the PFN's recalibration map on held-out prior draws (into its JSON)")
    p.add_argument("--weights", help="a .npz written by `bayescale pfn train` (default: the bundled one)")
    p.add_argument("--curves", type=int, default=4096, help="prior curves per split (default 4096)")
    p.add_argument("--seed", type=int, help="first calibration seed (default 30000000; see bayescale.pfn.calibrate)")
    p.set_defaults(func=cmd_pfn_calibrate)
    p = sub.add_parser("demo", help="fit Chinchilla below 1e21 FLOP and predict the larger runs")
    p.add_argument("--out", default="out", help="folder for the plot and JSON (default: out)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="fewer draws (for smoke tests)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("next-runs", help="rank candidate pilot runs by expected narrowing of a target per unit cost")
    p.add_argument("--law", required=True)
    p.add_argument("--target", required=True,
                   help="what to learn: N=7e10,D=1.4e12 (a point; ';' separates several: a curve) or compute_optimal=1e24")
    p.add_argument("--candidates", help="CSV/Parquet of runs you could train (input columns, optional 'cost')")
    p.add_argument("--grid", action="append", help="candidate axis NAME=LO:HI:COUNT (log-spaced) or NAME=V1,V2; repeat per input")
    p.add_argument("--k", type=int, default=1, help="runs to choose (greedy batch)")
    p.add_argument("--budget", type=float, help="most the batch may cost in total")
    p.add_argument("--cost", help="candidate column holding the cost (default: 'cost' if present, else 6ND or x)")
    p.add_argument("--outcomes", type=int, default=32, help="simulated outcomes per candidate (default 32)")
    p.add_argument("--target-sd", type=float, help="accuracy needed (posterior sd of the log target, 0.01 ~ 1%%): pick "
                   "the cheapest run expected to get there")
    p.add_argument("--horizon", type=float, help="compute you expect to spend on pilot runs from here on: compare "
                   "whole plans within it (a big run against many small ones) instead of the best single run per unit cost")
    p.add_argument("--local", metavar="TAU", help="fit the law locally around the target: each run and candidate gets "
                   "an extra error TAU x its distance in decades from the target (ln units per decade, e.g. 0.1), or "
                   "'auto': TAU calibrated by leave-future-out on the runs. For laws that hold only near the target")
    p.add_argument("--show", type=int, default=15, help="rows to print")
    p.add_argument("--out", help="write the whole ranking as CSV")
    _add_fit_args(p)
    p.set_defaults(func=cmd_next_runs)
    p = sub.add_parser("report", help="risk report for a budget decision (HTML, Markdown, JSON)")
    p.add_argument("--law", required=True)
    p.add_argument("--laws", help="several families (comma-separated): headline numbers from their stacking average; "
                   "fitted with the highest of their target acceptance rates unless --target-accept is given")
    p.add_argument("--option", action="append", required=True,
                   help="a planned run, e.g. \"70B,1.4T\" (N then D; suffixes K M B T) or \"N=70B,D=1.4T\"; repeat")
    p.add_argument("--target-loss", type=float, required=True, help="the loss the run must reach")
    p.add_argument("--candidates", help="CSV/Parquet of pilot runs to consider for the next-run recommendation")
    p.add_argument("--out", default="report", help="output folder (default: report)")
    _add_fit_args(p)
    p.set_defaults(func=cmd_report)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (BayescaleError, ValueError, KeyError, FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
