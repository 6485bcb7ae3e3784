"""NUTS settings on real curves: multi-start MAP (the default) or raw prior draws, and the target acceptance rate.

For each law, fits the first ``--curves`` image-classification curves of the revisiting benchmark (fit split) with
``fit_many``: chains started from optimised prior draws (``opt_steps=400``) at each ``--target-accept``, and from raw
prior draws (``opt_steps=0``) at the first. Reports the share of fits passing the diagnostics gate, the median and
worst r-hat, divergences, mean leapfrog steps per draw and wall time. Writes ``benchmarks/results/init.json`` and
the ``init`` table of ``benchmarks/RESULTS.md``.

    python -m benchmarks.init [--laws M4,BNSL1,BNSL2] [--curves 24] [--draws 1000] [--target-accept 0.9,0.95,0.99]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._common import (LEGACY_LIKELIHOOD, RESULTS, Table, command_line, describe, load_json, machine_info,
                                output_args, publish, save_json, shown)


def run(laws, n_curves: int, draws: int, seed: int = 0, target_accepts=(0.9,)) -> dict:
    import bayescale as bs

    r = bs.datasets.revisiting()
    ic = r[(r.domain == "IC") & r.train]
    curves = list(ic["curve"].unique())[:n_curves]
    runs = ic[ic["curve"].isin(curves)]
    out = {}
    for law in laws:
        configs = [("map", 400, ta) for ta in target_accepts] + [("prior", 0, target_accepts[0])]
        for name, opt_steps, ta in configs:
            t0 = time.perf_counter()
            fits = bs.fit_many(runs, law, group="curve", x="x", y="y", chains=4, warmup=draws, samples=draws,
                               seed=seed, progress=False, refit_flagged=False, opt_steps=opt_steps,
                               target_accept=ta, likelihood=LEGACY_LIKELIHOOD)
            secs = time.perf_counter() - t0
            s = fits.summary()
            steps = [f.diagnostics["mean_steps"] for f in fits.values()]
            out[f"{law}/{name}/{ta}"] = {
                "law": law, "init": name, "target_accept": ta, "curves": len(fits), "draws": draws, "seconds": secs,
                "ok_share": float(s["ok"].mean()), "median_max_rhat": float(s["max_rhat"].median()),
                "worst_max_rhat": float(s["max_rhat"].max()), "rhat_over_1.01": int((s["max_rhat"] > 1.01).sum()),
                "divergences": int(s["divergences"].sum()), "mean_leapfrog_steps": float(np.mean(steps)),
            }
            print(json.dumps(out[f"{law}/{name}/{ta}"]), flush=True)
    return out


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / "init.json")
    if res is None:
        return []
    rows = res["results"].values()
    commands = sorted({(v["date"], v["command"]) for v in rows if "command" in v})
    history = ""  # an earlier version of this script merged the rows of several invocations into one file
    if len(commands) > 1:
        history = f"{len(commands)} invocations: " + "; ".join(f"`{c}` ({d[:10]})" for d, c in commands)
    m = res["machine"]
    return [Table("init", "python -m benchmarks.init" if history else m["command"],
                  f"{describe(m)}; {shown(out / 'init.json')}",
                  ["law", "init", "target accept", "curves", "draws", "ok", "median max r-hat", "worst r-hat",
                   "curves r-hat > 1.01", "divergences", "leapfrog steps/draw", "s"],
                  [[v["law"], v["init"], v["target_accept"], v["curves"], v["draws"], f"{v['ok_share']:.0%}",
                    f"{v['median_max_rhat']:.3f}", f"{v['worst_max_rhat']:.3f}", v["rhat_over_1.01"],
                    v["divergences"], f"{v['mean_leapfrog_steps']:.1f}", f"{v['seconds']:.0f}"] for v in rows],
                  history)]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.init", description=__doc__.split("\n")[0])
    ap.add_argument("--laws", default="M4,BNSL1,BNSL2")
    ap.add_argument("--curves", type=int, default=24)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-accept", default="0.9,0.95,0.99", help="comma-separated NUTS target acceptance rates")
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("init", argv))
    res = run(args.laws.split(","), args.curves, args.draws, args.seed,
              tuple(float(v) for v in args.target_accept.split(",")))
    save_json(args.out / "init.json", {"machine": meta, "results": res})
    publish(tables, args)
    return res


if __name__ == "__main__":
    main()
