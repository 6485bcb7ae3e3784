"""How many chains a fit's own leave-future-out refits need: their errors with 4 and with 2 chains (issue 18).

A fit's default extrapolation error reads its own leave-future-out errors (:func:`bayescale.calibration.own_errors`,
up to four refits without its furthest runs), and those refits are most of the time of a user's first prediction
(``benchmarks/first_answer.py``). Each refit gives, per held-out run, ``r`` (ln y minus the predicted mean of ln y)
and ``s`` (the predictive sd of ln y), read from 600 posterior draws. This script asks whether 2 chains of 300
draws (the 600 draws a refit's errors read) give the same errors as 4 chains of 300, which the shipped error model
was learned with. On curves of every suite of the honest-bands benchmark (the first ``--per-suite`` of each, half as
many of each of revisiting's four domains) it computes each curve's own errors three times: 4 chains (seed 1), 4
chains (seed 2) and 2 chains (seed 2). It compares 2 chains with 4 of another seed against two seeds of 4 (Monte
Carlo noise alone): per held-out run ``|r_a - r_b| / s_a`` and ``|ln(s_b / s_a)|``; per curve the median and the 95%
quantile of ``tau``, the extrapolation error the shipped error model then gives
(:meth:`bayescale.error_model.ErrorModel.posterior`, as ``bs.fit`` does), as ``|ln(tau_b / tau_a)|``. The result file
keeps each call's seconds, compilation included (``benchmarks/first_answer.py`` times a user's process).

    python -m benchmarks.own_errors [--per-suite 6] [--likelihood logstudentt]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from benchmarks._common import (Table, command_line, describe, load_json, machine_info, output_args, publish,
                                save_json, shown)

SETTINGS = {"4 chains, seed 1": (4, 1), "4 chains, seed 2": (4, 2), "2 chains, seed 2": (2, 2)}
# 2 chains of seed 2, not 1: a run's first chains share their keys and starts with more chains of the same seed
PAIRS = (("4 chains, seed 1", "4 chains, seed 2"), ("4 chains, seed 1", "2 chains, seed 2"))
SEED = 0


def curves(per_suite: int) -> list[dict]:
    """The first ``per_suite`` curves of each suite of the honest-bands benchmark (revisiting: half as many of each
    of its four domains)."""
    from benchmarks.honest_bands import SUITES, tasks

    return [t for suite in SUITES
            for t in (tasks(suite, per_domain=max(1, per_suite // 2)) if suite == "revisiting"
                      else tasks(suite)[:per_suite])]


def run(per_suite: int, likelihood: str) -> dict:
    import bayescale as bs
    from bayescale import calibration
    from bayescale.error_model import default_error_model
    from bayescale.runs import fitted_span
    from benchmarks.honest_bands import DF, NUTS

    model = default_error_model(likelihood)
    rows = []
    for t in curves(per_suite):
        law = bs.get_law(t["law"])
        names = list(law.input_names)
        ctx = t["ctx"][names + ["y"]]
        main = bs.fit(ctx, law, inputs={k: k for k in names}, y="y", seed=SEED, progress=False,
                      likelihood=likelihood, df=DF, error=None, **NUTS)
        span, noise = fitted_span(law, main.scales), main.noise_level
        res = {"suite": t["suite"], "domain": t["domain"], "curve": str(t["curve"]), "law": t["law"]}
        for label, (chains, seed) in SETTINGS.items():
            kw = dict(NUTS, chains=chains)
            t0 = time.perf_counter()
            own, how = calibration.own_errors(
                law, ctx, lambda runs, s: main.refit(runs, seed=s, **kw), seed=SEED + 7919 * seed)
            secs = time.perf_counter() - t0
            err = model.posterior(law.name, span, noise, own, how)
            res[label] = {"r": own["r"].astype(float).tolist(), "s": own["s"].astype(float).tolist(),
                          "tau50": float(err.quantile(0.5)), "tau95": float(err.quantile(0.95)), "seconds": secs,
                          "how": how}
        rows.append(res)
        print(f"{t['suite']} {t['curve']}: " + ", ".join(
            f"{k}: tau {v['tau50']:.4f} ({v['seconds']:.1f} s)" for k, v in res.items() if isinstance(v, dict)),
            flush=True)
    return {"likelihood": likelihood, "per_suite": per_suite, "curves": rows}


def compare(curves_: list[dict], a: str, b: str) -> dict:
    """Run- and curve-level differences between settings ``a`` and ``b``."""
    dr, ds, dt50, dt95 = [], [], [], []
    for c in curves_:
        ra, rb = np.asarray(c[a]["r"]), np.asarray(c[b]["r"])
        sa, sb = np.asarray(c[a]["s"]), np.asarray(c[b]["s"])
        if len(ra) == len(rb) and len(ra):
            dr.extend(np.abs(ra - rb) / sa)
            ds.extend(np.abs(np.log(sb / sa)))
        for key, acc in (("tau50", dt50), ("tau95", dt95)):
            acc.append(abs(np.log(c[b][key] / c[a][key])))
    q = lambda v, p: float(np.quantile(v, p)) if len(v) else float("nan")  # noqa: E731
    return {"runs": len(dr), "curves": len(dt50), "dr50": q(dr, 0.5), "dr90": q(dr, 0.9), "ds50": q(ds, 0.5),
            "ds90": q(ds, 0.9), "dtau50_50": q(dt50, 0.5), "dtau50_90": q(dt50, 0.9), "dtau95_50": q(dt95, 0.5),
            "dtau95_90": q(dt95, 0.9)}


def tables(out):
    path = out / "own_errors.json"
    res = load_json(path)
    if res is None:
        return []
    cs = res["curves"]
    head = ["settings compared", "held-out runs", "median (90%) of abs(r_a - r_b) / s_a",
            "median (90%) of abs(ln(s_b / s_a))", "curves", "tau's median: median (90%) of abs(ln ratio)",
            "tau's 95% quantile: median (90%) of abs(ln ratio)"]
    rows = []
    for a, b in PAIRS:
        m = compare(cs, a, b)
        rows.append([f"{b} vs {a}", m["runs"], f"{m['dr50']:.3f} ({m['dr90']:.3f})",
                     f"{m['ds50']:.3f} ({m['ds90']:.3f})", m["curves"], f"{m['dtau50_50']:.3f} ({m['dtau50_90']:.3f})",
                     f"{m['dtau95_50']:.3f} ({m['dtau95_90']:.3f})"])
    suites = ", ".join(f"{s} {sum(c['suite'] == s for c in cs)}" for s in dict.fromkeys(c["suite"] for c in cs))
    source = (f"{describe(res['machine'])}; {res['likelihood']} fits and refits (300 warm-up steps and draws per "
              f"chain, as the honest-bands benchmark and the package's refits); curves: {suites}; {shown(path)}")
    return [Table("own_errors", res["machine"]["command"], source, head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.own_errors", description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-suite", type=int, default=6, help="curves per suite (per domain for revisiting)")
    ap.add_argument("--likelihood", default="logstudentt", help="noise model of the fits (default %(default)s)")
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("own_errors", argv))
    res = run(args.per_suite, args.likelihood)
    save_json(args.out / "own_errors.json", {"machine": meta, **res})
    publish(tables, args)


if __name__ == "__main__":
    main()
