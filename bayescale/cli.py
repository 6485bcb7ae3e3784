"""Command line: ``bayescale laws | fit | predict | compare | demo | next-runs | report``.

Tables go to stdout; ``--json`` prints machine-readable output instead. Bad input exits with status 2 and a
one-line ``error:`` message saying what to fix.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayescale as bs
from bayescale.errors import BayescaleError, FitFileError
from bayescale.noise import DEFAULT as DEFAULT_LIKELIHOOD
from bayescale.noise import LIKELIHOODS
from bayescale.runs import parse_size, read_runs

POINTS_HELP = ("one point per ';'-separated row, each row name=value,... (the law's inputs or the fitted columns) "
               "or its values alone in input order; sizes may carry K, M, B, T")


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


def _text_table(rows: list[dict]) -> str:
    """Rows of strings as aligned text: the first column left-aligned, the others right-aligned."""
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    fmt = lambda vals: "  ".join(f"{v:<{width[c]}}" if i == 0 else f"{v:>{width[c]}}"  # noqa: E731
                                 for i, (c, v) in enumerate(zip(cols, vals)))
    return "\n".join([fmt(cols), *(fmt([str(r[c]) for c in cols]) for r in rows)])


BEYOND_NOTE = ("beyond: decades past the fitted runs (0 inside their range; for N and D, past them in either input "
               "or in N x D); the bands widen with it")


def _law_help() -> str:
    names = ", ".join(law.name for law in bs.list_laws())
    return f"law family, one of: {names} (`bayescale laws NAME` explains one)"


def _prior_text(param, law) -> str:
    """A parameter's prior in words: the distribution with its numbers when they are fixed, else what the data sets."""
    def scales(k):  # two made-up data scales: a prior whose numbers differ between them is scaled by the data
        names = law.input_names
        return bs.laws.Scales(1.0 * k, 2.0 * k, 1.5 * k, dict.fromkeys(names, 3.0 * k), dict.fromkeys(names, -k),
                              dict.fromkeys(names, k))

    try:
        d1, d2 = param.prior(scales(1.0)), param.prior(scales(2.0))
        args1 = {k: float(np.asarray(getattr(d1, k))) for k in d1.arg_constraints}
        args2 = {k: float(np.asarray(getattr(d2, k))) for k in d2.arg_constraints}
    except Exception:  # a user's prior that needs more of the data than these scales give
        return "set from the data"
    kind = type(d1).__name__
    if kind.startswith("_") and hasattr(d1, "base_dist"):  # a private transform: name what it transforms
        kind = f"transformed {type(d1.base_dist).__name__}"
    if args1 and args1 == args2:
        if kind == "LogNormal":
            return (f"LogNormal: median {np.exp(args1['loc']):.3g}, 90% within a factor "
                    f"{np.exp(1.645 * args1['scale']):.3g} of it")
        return f"{kind}(" + ", ".join(f"{k}={v:.3g}" for k, v in args1.items()) + ")"
    doc = (getattr(param.prior, "__doc__", None) or "").strip().splitlines()
    return f"{kind}, scaled by the data" + (f": {doc[0][:1].lower()}{doc[0][1:].rstrip('.')}" if doc else "")


def _law_detail(law) -> dict:
    return {"name": law.name, "formula": law.formula, "description": law.description, "reference": law.reference,
            "inputs": [{"name": i.name, "description": i.description, "scale": i.scale} for i in law.inputs],
            "min_points": law.needs_points, "y_range": list(law.y_range), "target_accept": law.target_accept,
            "parameters": [{"name": p.name, "description": p.description, "prior": _prior_text(p, law)}
                           for p in law.params]}


def _print_law(law) -> None:
    d = _law_detail(law)
    wrap = textwrap.TextWrapper(width=100, subsequent_indent="    ")
    print(wrap.fill(f"{law.name}: {law.description}"))
    print(wrap.fill(f"  {law.formula}"))
    if law.reference:
        print(wrap.fill(f"  reference: {law.reference}"))
    print(wrap.fill("  inputs: " + "; ".join(f"{i['name']} ({i['description'] or 'no description'}, "
                                            f"{i['scale']} scale)" for i in d["inputs"])))
    print(wrap.fill(f"  y in [{law.y_range[0]:g}, {law.y_range[1]:g}]; a fit needs at least {law.needs_points} "
                    f"distinct runs; NUTS target acceptance {law.target_accept:g}"))
    print("parameters (as sampled):")
    width = max(len(p["name"]) for p in d["parameters"]) + 2
    pwrap = textwrap.TextWrapper(width=100, initial_indent="  ", subsequent_indent=" " * (width + 2))
    for p in d["parameters"]:
        print(pwrap.fill(f"{p['name']:<{width}}{p['description'] or '(no description)'}"))
        print(pwrap.fill(f"{'':<{width}}prior: {p['prior']}"))
    print(textwrap.fill(
        "The data centre is the runs' mean input (geometric for a log-scale input); each power-law term is sampled "
        "as its log value there, and `bayescale fit` also reports the published form. A prior 'scaled by the data' "
        "is weakly informative around the observed y and input ranges.", width=100))


def _laws_table(laws) -> str:
    """name, inputs, points needed and formula, wrapped to 100 columns."""
    w_name = max(4, *(len(law.name) for law in laws))
    w_in = max(6, *(len(",".join(law.input_names)) for law in laws))
    lead = w_name + w_in + 6 + 6
    fw = textwrap.TextWrapper(width=100 - lead, break_long_words=False, subsequent_indent="  ")
    lines = [f"{'name':<{w_name}}  {'inputs':<{w_in}}  points  formula"]
    for law in laws:
        parts = fw.wrap(law.formula)
        lines.append(f"{law.name:<{w_name}}  {','.join(law.input_names):<{w_in}}  {law.needs_points:>6}  {parts[0]}")
        lines += [" " * lead + p for p in parts[1:]]
    lines += ["points: the fewest distinct runs a fit needs.",
              "`bayescale laws NAME` explains a family: its inputs, parameters, priors and reference."]
    return "\n".join(lines)


def cmd_laws(args) -> int:
    name = args.name or args.law
    if name:
        law = bs.get_law(name)
        if args.json:
            print(json.dumps(_law_detail(law), indent=2, default=float))
        else:
            _print_law(law)
        return 0
    if args.json:
        rows = [{"name": law.name, "inputs": ",".join(law.input_names), "formula": law.formula,
                 "parameters": ",".join(law.param_names), "min_points": law.needs_points,
                 "y_range": f"[{law.y_range[0]:g}, {law.y_range[1]:g}]", "target_accept": law.target_accept,
                 "description": law.description}
                for law in bs.list_laws()]
        _print_table(pd.DataFrame(rows), True)
    else:
        print(_laws_table(bs.list_laws()))
    return 0


def _fit_kwargs(args, law) -> dict:
    kw = {"y": args.y, "likelihood": args.likelihood, "chains": args.chains, "warmup": args.warmup,
          "samples": args.samples, "seed": args.seed, "progress": False if args.quiet else None}
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
    if args.pool_errors and args.group is None:
        raise BayescaleError("--pool-errors pools the own leave-future-out errors of the curves of one domain; name "
                             "the column of curves with --group COLUMN")
    f = bs.fit(args.runs, law, group=args.group, **_fit_kwargs(args, law))
    if args.pool_errors:
        f = f.pool_errors()
    fits = f if isinstance(f, dict) else {None: f}
    report = {}
    for g, one in fits.items():
        summ = one.summary()
        d = one.diagnostics
        rhat = d["max_rhat"] if np.isfinite(d["max_rhat"]) else None  # NaN with one chain; null in JSON
        report[str(g)] = {"law": law.name, "ok": one.ok, "warnings": one.warnings, "max_rhat": rhat,
                          "min_ess_bulk": d["min_ess_bulk"], "divergences": d["divergences"],
                          "parameters": json.loads(summ[["mean", "sd", "q5", "q95"]].to_json(orient="index"))}
        if not args.json:
            head = f"law {law.name}: {law.formula}" + ("" if g is None else f"  [group {g}]")
            print(head)
            _print_table(summ, False)
            shown = "n/a (one chain)" if d["chains"] < 2 else f"{d['max_rhat']:.4f}"
            print(f"diagnostics: max r-hat {shown}, min bulk ESS {d['min_ess_bulk']:.0f}, "
                  f"divergences {d['divergences']} -> {'OK' if one.ok else 'NOT OK'}")
            for w in one.warnings:
                print(f"  warning: {w}")
            if args.pool_errors:
                print(f"extrapolation error: {one.error.describe()}")
        if args.pool_errors:
            report[str(g)]["extrapolation_error"] = one.error.describe()
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
    bands = f.predict(args.at, levels=_levels(args.levels), seed=args.seed, raw=args.raw)
    if args.out:
        bands.to_netcdf(args.out)
    if args.json:
        print(json.dumps(bands.to_json(), indent=2, default=float))
    else:
        print(f"law {f.law.name} ({f.likelihood} noise); bands for a new run (noise included)"
              + ("" if f.local is None else f"; fitted locally around these points ({f.local['tau']:.3g} per decade "
                                            "of distance from them)"))
        print(f"extrapolation error: {bands.attrs['extrapolation_error']}"
              + ("" if args.raw else " (--raw: the raw posterior, too narrow beyond the runs)"))
        _print_table(bands.table(), False)
        print(BEYOND_NOTE)
        if not f.ok:
            print("warning: the fit's diagnostics failed: " + "; ".join(f.warnings))
    return 0


def _predict_pfn(args) -> int:
    from bayescale.pfn.infer import predict as pfn_predict  # defer heavy imports

    if not args.x:
        raise BayescaleError("--method pfn needs --x <column> (the one input) and --y <column>")
    res = pfn_predict(args.fit, x=args.x, y=args.y, at=args.at, levels=_levels(args.levels), group=args.group,
                      seed=args.seed or 0, weights=args.weights, calibrated=not args.raw,
                      error="raw" if args.raw else "default")
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
    print(BEYOND_NOTE)
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
    with warnings.catch_warnings():  # ArviZ warns once per family without naming it; said in one line below
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto")
        table = bs.compare(fits, ic=args.ic)
    ic = table.attrs.get("ic", "loo")
    rows, high_k = [], []
    for name, r in table.iterrows():
        d, n_runs = fits[name].diagnostics, len(fits[name].runs)
        m = re.match(r"\s*(\d+)\D+([0-9.]+)", str(r.get("diag_elpd") or ""))
        if m:
            high_k.append(f"{name} ({m.group(1)} of {n_runs} runs)")
            k_limit = m.group(2)
        rows.append({"family": name, "weight": float(r["weight"]), "elpd": float(r["elpd"]), "elpd_se": float(r["se"]),
                     "diff": float(r["elpd_diff"]), "diff_se": float(r["dse"]),
                     "high_pareto_k": int(m.group(1)) if m else 0, "fit_ok": bool(fits[name].ok), "max_rhat": d["max_rhat"] if np.isfinite(d["max_rhat"]) else None,
                     "divergences": int(d["divergences"])})
    warning = None
    if high_k and ic == "loo":
        warning = (f"Pareto k > {k_limit} in " + ", ".join(high_k) + ": leaving one of those runs out moves the fit "
                   "too much for PSIS-LOO to estimate, so that family's elpd (and weight) may be too favourable; check "
                   "those runs or read this comparison as rough")
    if args.json:
        print(json.dumps({"ic": ic, "rows": rows, "warning": warning}, indent=2, default=float))
        return 0
    print(_text_table([{
        "family": r["family"], "weight": f"{r['weight']:.2f}", "elpd (se)": f"{r['elpd']:.1f} ({r['elpd_se']:.1f})",
        "vs best (se)": "best" if r["diff"] == 0 else f"{r['diff']:.1f} ({r['diff_se']:.1f})",
        "fit": "ok" if r["fit_ok"] else "NOT OK",
        "max r-hat": "n/a" if r["max_rhat"] is None else f"{r['max_rhat']:.3f}", "divergences": r["divergences"]}
        for r in rows]))
    scored = ("each of the largest runs predicted from the smaller ones (leave-future-out)" if ic == "lfo"
              else "each run predicted without it (PSIS-LOO)")
    print(f"weight: share in the stacking average; elpd: summed log density of {scored}, higher is better; vs best: "
          "elpd minus the best family's (within ~2 se: no clear winner); fit: r-hat <= 1.01, enough ESS, at most 1 "
          "divergence per 1000 draws")
    if warning:
        print("warning: " + warning)
    for r in rows:
        if not r["fit_ok"]:
            print(f"warning: the {r['family']} fit failed its diagnostics: {'; '.join(fits[r['family']].warnings)}")
    return 0


def cmd_demo(args) -> int:
    from bayescale.demo import run_demo  # defer heavy imports

    run_demo(out_dir=args.out, seed=args.seed, quick=args.quick)
    return 0


def _saved_fit(path):
    """The fit in ``path`` when it is a file written by ``bayescale fit --out``; None for a run table."""
    p = Path(path)
    if p.suffix.lower() in (".csv", ".tsv", ".txt", ".parquet", ".pq") or not p.is_file():
        return None
    try:
        return bs.load_fit(p)
    except FitFileError:
        if p.suffix.lower() in (".nc", ".h5", ".netcdf"):
            raise
        return None


def _runs_law(args, command: str):
    """The law to fit the run table with: ``--law``, else the first of ``--laws`` where the command has it."""
    name = args.law or (getattr(args, "laws", None) or "").split(",")[0].strip()
    if not name:
        raise BayescaleError(f"{command}: give --law NAME" + (" or --laws A,B" if hasattr(args, "laws") else "")
                             + f" to fit {args.runs} (one of {', '.join(law.name for law in bs.list_laws())}), or "
                             "pass a saved fit (.nc from `bayescale fit --out`) instead of the run table")
    if not args.x:
        raise BayescaleError(f"{command}: give --x, the input columns of {args.runs}, e.g. --x N=params,D=tokens "
                             "(or pass a saved fit, .nc from `bayescale fit --out`)")
    return bs.get_law(name)


def _check_fit_laws(args, fits: dict) -> None:
    """``--law``/``--laws``, when given with saved fits, must name the fits' own laws."""
    named = [n.strip() for n in [args.law or "", *(getattr(args, "laws", None) or "").split(",")] if n.strip()]
    other = [n for n in named if bs.get_law(n).name not in fits]
    if other:
        raise BayescaleError(f"--law/--laws name {', '.join(other)} but the saved fit(s) are of "
                             f"{', '.join(fits)}: drop --law/--laws (a saved fit carries its law) or pass a fit of "
                             "each family")


def _grid_axis(spec: str):
    """``N=1e8:1e10:5`` (5 log-spaced values) or ``N=1e8,3e8,1e9`` -> (name, values)."""
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

    if not args.runs:
        raise BayescaleError("next-runs: give the pilot runs (CSV/Parquet) or a saved fit (.nc from `bayescale fit "
                             "--out`)")
    saved = _saved_fit(args.runs)
    if saved is not None:
        _check_fit_laws(args, {saved.law.name: saved})
    law = saved.law if saved is not None else _runs_law(args, "next-runs")
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
    if saved is None:
        kw = _fit_kwargs(args, law)
        parse_target(args.target, law, kw["inputs"])  # before fitting: a typo costs no minutes
        f = bs.fit(args.runs, law, **kw)
        refit = {k: kw[k] for k in ("chains", "warmup", "samples", "seed") if k in kw}
    else:
        f, st = saved, saved.settings
        refit = {"chains": st.num_chains, "warmup": st.num_warmup, "samples": st.num_samples}
    if local is not None:
        f = _localized(f, local, parse_target(args.target, law, f.columns)[1], refit)
    search = SearchOptions(n_outcomes=args.outcomes, target_sd=args.target_sd, horizon=args.horizon)
    table = next_runs(f, cands, target=args.target, budget=args.budget, k=args.k, cost=args.cost, seed=args.seed,
                      search=search)
    if args.out:
        table.to_csv(args.out, index=False)
    if not args.json:
        print(f"target {args.target}: posterior sd of log {f.columns.get('y', args.y)} now "
              f"{table.attrs['var_before'] ** 0.5:.4g}; "
              f"chosen batch ({int(table['chosen'].sum())} run(s), cost {table.attrs['batch_cost']:.4g}) first")
        if table.attrs.get("already_have"):
            n = table.attrs["already_have"]
            print(f"left out {n} candidate{'s' * (n > 1)} you already have (the same inputs as a fitted run)")
        if f.local is not None:
            print(f"local fit: runs and candidates carry an extra error of {f.local['tau']:.3g} per decade from the "
                  "target (ln units)")
        with pd.option_context("display.max_rows", args.show):
            _print_table(_readable_next_runs(table.head(args.show), list(law.input_names)), False)
        print("(--json or --out FILE for every column: scores, Monte Carlo errors, effective sample sizes)")
        if "warning" in table.attrs:
            print("warning: " + table.attrs["warning"])
        if not f.ok:
            print("warning: the fit's diagnostics failed: " + "; ".join(f.warnings))
    else:
        _print_table(table, True, {"target": args.target, "var_before": table.attrs["var_before"],
                                   "fit_ok": f.ok, "warning": table.attrs.get("warning")})
    return 0


def cmd_compute_optimal(args) -> int:
    from bayescale.decisions import compute_optimal  # defer heavy imports
    from bayescale.decisions.risk import format_size

    if not args.runs:
        raise BayescaleError("compute-optimal: give the pilot runs (CSV/Parquet) or a saved fit (.nc from "
                             "`bayescale fit --out`)")
    budgets = []
    for b in args.budget:
        for v in (t.strip() for t in b.split(",")):
            try:
                budgets.append(float(v) if re.fullmatch(r"[-+0-9.eE]+", v) else parse_size(v))
            except (ValueError, BayescaleError):
                raise BayescaleError(f"--budget {v!r}: give compute budgets as numbers, e.g. --budget 1e22 "
                                     "--budget 1e24 (FLOP under 6ND)") from None
    if not all(np.isfinite(b) and b > 0 for b in budgets):
        raise BayescaleError(f"--budget: compute budgets must be positive numbers (FLOP under 6ND), got {budgets}")
    levels = _levels(args.levels)
    saved = _saved_fit(args.runs)
    law = saved.law if saved is not None else _runs_law(args, "compute-optimal")
    if set(law.input_names) != {"N", "D"}:  # before fitting: a wrong law costs no minutes
        raise BayescaleError(f"compute-optimal needs a law in model size N and tokens D (chinchilla, kaplan, ...); "
                             f"{law.name!r} has inputs {list(law.input_names)}")
    if saved is not None:
        _check_fit_laws(args, {saved.law.name: saved})
        f = saved
    else:
        f = bs.fit(args.runs, law, **_fit_kwargs(args, law))
    opt = compute_optimal(f, budgets, levels=levels, seed=args.seed,
                          profiles=None if args.profiles == "none" else "auto")
    lv = max(levels)

    def iv(name, fmt, i):  # "median [lower, upper]" of variable ``name`` at budget ``i``
        lo, hi = (float(opt[f"{name}_{k}"].sel(level=lv).values[i]) for k in ("lower", "upper"))
        return f"{fmt(float(opt[f'{name}_median'].values[i]))} [{fmt(lo)}, {fmt(hi)}]"

    rows = [{"budget (FLOP)": f"{c:.3g}", f"N* ({lv:.0%})": iv("N_opt", format_size, i),
             f"D* ({lv:.0%})": iv("D_opt", format_size, i),
             "tokens per parameter": iv("tokens_per_param", lambda v: f"{v:.3g}", i),
             f"L* ({lv:.0%})": iv("L_opt", lambda v: f"{v:.4g}", i)} for i, c in enumerate(opt["budget"].values)]
    if args.json:
        keep = [v for v in opt.data_vars if not v.endswith("_draws")]
        out = {v: np.asarray(opt[v].values).tolist() for v in keep}
        print(json.dumps({"budget": opt["budget"].values.tolist(), "level": opt["level"].values.tolist(), **out,
                          "optimum": opt.attrs["optimum"], "fit_ok": bool(f.ok)}, indent=2, default=float))
        return 0
    print(_text_table(rows))
    print(f"N*: {opt.attrs['optimum']}")
    if "profile_budget" in opt:
        prof = [{"isoFLOP profile (FLOP)": f"{b:.3g}", "N* of its runs (parabola)": format_size(n) if n == n else "-",
                 "N* of the law": format_size(m), "used": "yes" if u else "no"}
                for b, n, m, u in zip(opt["profile_budget"].values, opt["profile_N_opt"].values,
                                      opt["profile_N_law"].values, opt["profile_used"].values)]
        print(_text_table(prof))
    if not f.ok:
        print("warning: the fit's diagnostics failed: " + "; ".join(f.warnings))
    return 0


def _readable_next_runs(table: pd.DataFrame, inputs: list) -> pd.DataFrame:
    """next_runs' table in units a person uses: what to train, what it costs, what it buys."""
    from bayescale.decisions.risk import format_size  # defer heavy imports

    return pd.DataFrame({
        **{c: [format_size(float(v)) for v in table[c]] for c in inputs if c in table},
        "cost": [f"{v:.3g}" for v in table["cost"]],
        "sd now": [f"{v:.4f}" for v in table["target_sd"]],
        "expected sd after": [f"{v:.4f}" for v in table["expected_sd_after"]],
        "variance cut": [f"{v:.0%}" for v in table["reduction_frac"]],
        "chosen": [f"#{int(b)}" if c else "" for c, b in zip(table["chosen"], table["batch"])],
    })


def cmd_report(args) -> int:
    from bayescale.decisions import parse_option, risk_report  # defer heavy imports
    from bayescale.sampler import SamplerSettings  # defer heavy imports

    saved = [bs.load_fit(p) for p in args.fit or []]
    first = _saved_fit(args.runs) if args.runs else None
    if args.runs and saved and first is None:
        raise BayescaleError(f"give the pilot runs either as a run table ({args.runs}) or as saved fits (--fit), "
                             "not both")
    saved = ([first] if first is not None else []) + saved
    cands = None
    if args.candidates:
        cands = read_runs(args.candidates)
    if saved:
        fits = {}
        for f in saved:
            if f.law.name in fits:
                raise BayescaleError(f"two saved fits of law {f.law.name!r}: give one fit per family")
            fits[f.law.name] = f
        _check_fit_laws(args, fits)
        for o in args.option:
            parse_option(o, saved[0].law)
        rep = risk_report(fits=fits, options=args.option, target_loss=args.target_loss, seed=args.seed,
                          out=args.out, candidates=cands)
    else:
        if not args.runs:
            raise BayescaleError("report: give the pilot runs (CSV/Parquet) or saved fits (--fit a.nc --fit b.nc)")
        law = _runs_law(args, "report")
        for o in args.option:  # before fitting: a typo costs no minutes
            parse_option(o, law)
        if args.likelihood != DEFAULT_LIKELIHOOD or args.se or args.lower or args.upper:
            raise BayescaleError(f"report uses the default {DEFAULT_LIKELIHOOD} noise without measurement error "
                                 "columns")
        # one setting for every family: by default the most careful of their own target_accept
        families = [law.name, *(args.laws.split(",") if args.laws else [])]
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


def _add_fit_args(p, saved_fit: bool = False):
    """The run table and fitting options; ``saved_fit``: the command also takes a saved fit in place of the runs."""
    if saved_fit:
        p.add_argument("runs", nargs="?", help="CSV or Parquet file, one row per training run, or a saved fit (.nc "
                       "from `bayescale fit --out`: no refit, and the options below that fit are not used)")
    else:
        p.add_argument("runs", help="CSV or Parquet file, one row per training run")
    p.add_argument("--x", required=not saved_fit,
                   help="input columns: 'N,D' (in the law's input order) or 'N=params,D=tokens'")
    p.add_argument("--y", default="loss", help="outcome column (default: loss)")
    p.add_argument("--se", help="column with the standard error of y")
    p.add_argument("--lower", help="column with the lower bound of a 95%% interval of y")
    p.add_argument("--upper", help="column with the upper bound of a 95%% interval of y")
    p.add_argument("--likelihood", default=DEFAULT_LIKELIHOOD, choices=list(LIKELIHOODS))
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
    p = sub.add_parser("laws", help="list the registered law families, or explain one (`bayescale laws chinchilla`)")
    p.add_argument("name", nargs="?", help="a family to explain: its inputs, parameters and their priors")
    p.add_argument("--law", help="the same as NAME: " + _law_help())
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_laws)
    p = sub.add_parser("fit", help="fit a law with NUTS and save the posterior")
    p.add_argument("--law", required=True, help=_law_help())
    p.add_argument("--group", help="column naming curves: fit each one (vectorised)")
    p.add_argument("--out", help="netCDF file for the fit (with --group: one file per group)")
    p.add_argument("--pool-errors", action="store_true", help="(with --group) the curves come from one domain: "
                   "each curve's extrapolation error learns from every curve's leave-future-out errors, not only its "
                   "own (refits each curve without its largest runs now; the saved fits keep the pooled error)")
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
    p.add_argument("--raw", action="store_true", help="the raw posterior, without the extrapolation error learned "
                   "from real curves (nuts), or the raw network's predictive, neither recalibrated nor with that "
                   "error (pfn); bands beyond the runs are then too narrow")
    p.add_argument("--at", required=True, help=f"query points: {POINTS_HELP}; e.g. \"N=70B,D=1.4T\" or "
                   "\"N=70B,D=1.4T;N=35B,D=2.8T\" (two points)")
    p.add_argument("--local", metavar="TAU", help="refit the law locally around the query points: each fitted run "
                   "carries an extra error TAU x its distance in decades from them (e.g. 0.1), or 'auto' (TAU by "
                   "leave-future-out on the runs)")
    p.add_argument("--levels", default="0.5,0.8,0.9,0.95", help="central interval levels, comma-separated (each "
                   "gives columns loNN and hiNN; default 0.5,0.8,0.9,0.95)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", help="write the bands as netCDF")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)
    p = sub.add_parser("compare", help="fit several laws to the same runs and weigh them by how they extrapolate")
    p.add_argument("--laws", required=True, help="comma-separated law names")
    p.add_argument("--ic", default="auto", choices=["auto", "lfo", "loo"],
                   help="scores behind the weights: leave-future-out (largest runs from smaller ones; auto) or PSIS-LOO")
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
    p.add_argument("--law", help=_law_help() + "; not needed with a saved fit")
    p.add_argument("--target", required=True,
                   help="what to learn: a point \"N=70B,D=1.4T\", several (a curve) \"N=70B,D=1.4T;N=35B,D=2.8T\" "
                   f"({POINTS_HELP}), or compute_optimal=1e24")
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
    _add_fit_args(p, saved_fit=True)
    p.set_defaults(func=cmd_next_runs)
    p = sub.add_parser("compute-optimal", help="the compute-optimal model size, tokens and loss at given budgets")
    p.add_argument("--law", help=_law_help() + "; not needed with a saved fit")
    p.add_argument("--budget", action="append", required=True,
                   help="a compute budget in FLOP (6ND), e.g. 1e24; repeat or comma-separate for several")
    p.add_argument("--profiles", default="auto", choices=["auto", "none"],
                   help="auto: check the law's optimum against the isoFLOP profiles among the runs (several sizes "
                   "at one budget) and follow them where there are three or more; none: the law's optimum")
    p.add_argument("--levels", default="0.8", help="interval levels (the widest is shown; default 0.8)")
    _add_fit_args(p, saved_fit=True)
    p.set_defaults(func=cmd_compute_optimal)
    p = sub.add_parser("report", help="risk report for a budget decision (HTML, Markdown, JSON)")
    p.add_argument("--law", help=_law_help() + "; default: the first of --laws; not needed with saved fits")
    p.add_argument("--laws", help="several families (comma-separated): headline numbers from their stacking average; "
                   "fitted with the highest of their target acceptance rates unless --target-accept is given")
    p.add_argument("--fit", action="append", metavar="FIT.nc",
                   help="a saved fit (from `bayescale fit --out`) to use instead of fitting the runs; repeat for "
                   "several families (fitted to the same runs): the headline numbers then come from their average")
    p.add_argument("--option", action="append", required=True,
                   help="a planned run: \"N=70B,D=1.4T\" or its values in the law's input order, \"70B,1.4T\" "
                   "(sizes may carry K, M, B, T); repeat for each option")
    p.add_argument("--target-loss", type=float, required=True, help="the loss the run must reach")
    p.add_argument("--candidates", help="CSV/Parquet of pilot runs to consider for the next-run recommendation")
    p.add_argument("--out", default="report", help="output folder (default: report)")
    _add_fit_args(p, saved_fit=True)
    p.set_defaults(func=cmd_report)
    return ap


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning  # one line each, as the errors
        try:
            return args.func(args)
        except (BayescaleError, ValueError, KeyError, OSError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            print(f"error: {msg}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
