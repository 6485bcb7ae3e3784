"""Command line: ``bayescale laws | fit | predict | compare | demo``.

Tables go to stdout; ``--json`` prints machine-readable output instead. Bad input exits with status 2 and a
one-line ``error:`` message saying what to fix.
"""

from __future__ import annotations

import argparse
import json
import sys


from bayescale.errors import BayescaleError


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
    import pandas as pd

    if as_json:
        print(json.dumps({**(extra or {}), "rows": json.loads(df.to_json(orient="records"))}, indent=2, default=float))
    else:
        with pd.option_context("display.width", 160, "display.max_columns", 30, "display.float_format", "{:.5g}".format):
            print(df.to_string())


def cmd_laws(args) -> int:
    import pandas as pd

    from bayescale.laws import list_laws

    rows = [{"name": law.name, "inputs": ",".join(law.input_names), "formula": law.formula,
             "parameters": ",".join(law.param_names), "min_points": law.needs_points,
             "y_range": f"[{law.y_range[0]:g}, {law.y_range[1]:g}]", "description": law.description}
            for law in list_laws()]
    _print_table(pd.DataFrame(rows).set_index("name") if not args.json else pd.DataFrame(rows), args.json)
    return 0


def _fit_kwargs(args, law) -> dict:
    kw = {"y": args.y, "likelihood": args.likelihood, "chains": args.chains, "warmup": args.warmup,
          "samples": args.samples, "seed": args.seed, "progress": not args.quiet and sys.stderr.isatty()}
    kw["inputs"] = _inputs(law, args.x)
    if args.se:
        kw["se"] = args.se
    if args.lower or args.upper:
        kw["lower"], kw["upper"] = args.lower, args.upper
    return kw


def cmd_fit(args) -> int:
    import bayescale as bs

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


def cmd_predict(args) -> int:
    import bayescale as bs

    f = bs.load_fit(args.fit)
    bands = f.predict(args.at, levels=_levels(args.levels), seed=args.seed)
    if args.out:
        bands.to_netcdf(args.out)
    if args.json:
        print(json.dumps(bands.to_json(), indent=2, default=float))
    else:
        print(f"law {f.law.name} ({f.likelihood} noise); bands for a new run (noise included)")
        _print_table(bands.table(), False)
        if not f.ok:
            print("warning: the fit's diagnostics failed: " + "; ".join(f.warnings))
    return 0


def cmd_compare(args) -> int:
    import bayescale as bs

    laws = [bs.get_law(n) for n in args.laws.split(",")]
    fits = {law.name: bs.fit(args.runs, law, **_fit_kwargs(args, law)) for law in laws}
    table = bs.compare(fits)
    _print_table(table.reset_index() if args.json else table, args.json)
    return 0


def cmd_demo(args) -> int:
    from bayescale.demo import run_demo

    run_demo(out_dir=args.out, seed=args.seed, quick=args.quick)
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
    p = sub.add_parser("predict", help="posterior predictive bands from a saved fit")
    p.add_argument("fit", help="netCDF file written by `bayescale fit --out`")
    p.add_argument("--at", required=True, help="query points, e.g. N=7e10,D=1.4e12 (';' separates several)")
    p.add_argument("--levels", default="0.5,0.8,0.9,0.95")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", help="write the bands as netCDF")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)
    p = sub.add_parser("compare", help="fit several laws to the same runs and compare them with LOO")
    p.add_argument("--laws", required=True, help="comma-separated law names")
    _add_fit_args(p)
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("demo", help="fit Chinchilla below 1e21 FLOP and predict the larger runs")
    p.add_argument("--out", default="out", help="folder for the plot and JSON (default: out)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="fewer draws (for smoke tests)")
    p.set_defaults(func=cmd_demo)
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
