"""NUTS settings on real curves: multi-start MAP (the default) or raw prior draws, and the target acceptance rate.

For each law, fits the first ``--curves`` image-classification curves of the revisiting benchmark (fit split) with
``fit_many``: chains started from optimised prior draws (``opt_steps=400``) at each ``--target-accept``, and from raw
prior draws (``opt_steps=0``) at the first. Reports the share of fits passing the diagnostics gate, the median and worst r-hat, divergences,
mean leapfrog steps per draw and wall time. Writes ``benchmarks/results/init.json`` and the ``init`` section of
``benchmarks/RESULTS.md``.

    python -m benchmarks.init [--laws M4,BNSL1] [--curves 24] [--draws 1000] [--target-accept 0.9,0.95,0.99]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._common import ROOT  # noqa: E402
START, END = "<!-- init:start -->", "<!-- init:end -->"


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
                               target_accept=ta)
            secs = time.perf_counter() - t0
            s = fits.summary()
            steps = [f.diagnostics["mean_steps"] for f in fits.values()]
            out[f"{law}/{name}/{ta}"] = {
                "law": law, "init": name, "target_accept": ta, "curves": len(fits), "seconds": secs,
                "ok_share": float(s["ok"].mean()), "median_max_rhat": float(s["max_rhat"].median()),
                "worst_max_rhat": float(s["max_rhat"].max()), "rhat_over_1.01": int((s["max_rhat"] > 1.01).sum()),
                "divergences": int(s["divergences"].sum()), "mean_leapfrog_steps": float(np.mean(steps)),
            }
            print(json.dumps(out[f"{law}/{name}/{ta}"]), flush=True)
    return out


def markdown(res: dict, meta: dict) -> str:
    lines = [START, "## NUTS settings: initialisation (multi-start MAP vs prior draws) and target acceptance", "",
             "; ".join(sorted({f"`{v.get('command', meta['command'])}` ({v.get('date', meta['date'])[:10]})"
                               for v in res.values()}))
             + f" on {meta['cpu_model']} ({meta['cpu_count']} cores, JAX {meta['jax_backend']}). Revisiting benchmark, "
             "IC curves, fit split; 4 chains x (draws warm-up + draws), `fit_many`, no refits.", "",
             "| law | init | target accept | curves | draws | ok | median max r-hat | worst r-hat | curves r-hat > 1.01 | divergences | leapfrog steps/draw | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in res.values():
        lines.append(f"| {v['law']} | {v['init']} | {v.get('target_accept', 0.9)} | {v['curves']} | {v.get('draws', '')} | "
                     f"{v['ok_share']:.0%} | "
                     f"{v['median_max_rhat']:.3f} | "
                     f"{v['worst_max_rhat']:.3f} | {v['rhat_over_1.01']} | {v['divergences']} | "
                     f"{v['mean_leapfrog_steps']:.1f} | {v['seconds']:.0f} |")
    notes = [f"{v['law']} {v['init']} {v.get('target_accept', 0.9)}: {v['note']}" for v in res.values() if v.get("note")]
    if notes:
        lines += ["", "Notes: " + "; ".join(notes) + "."]
    lines.append(END)
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.init", description=__doc__.split("\n")[0])
    ap.add_argument("--laws", default="M4,BNSL1")
    ap.add_argument("--curves", type=int, default=24)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-accept", default="0.9,0.95,0.99", help="comma-separated NUTS target acceptance rates")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--md", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args(argv)
    from benchmarks._common import update_markdown
    from benchmarks.speed import machine_info

    meta = machine_info("python -m benchmarks.init " + " ".join(argv if argv is not None else sys.argv[1:]))
    res = run(args.laws.split(","), args.curves, args.draws, args.seed,
              tuple(float(v) for v in args.target_accept.split(",")))
    for v in res.values():
        v.update(command=meta["command"], date=meta["date"], draws=args.draws)
    path = Path(args.out) / "init.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # rows of earlier runs (other laws or settings) stay unless this run measured the same law, init and rate
    old = json.loads(path.read_text()).get("results", {}) if path.exists() else {}
    merged = {**{k: v for k, v in old.items() if k.count("/") == 2 and "command" in v}, **res}
    path.write_text(json.dumps({"machine": meta, "results": merged}, indent=2))
    if args.md:
        update_markdown(Path(args.md), markdown(merged, meta), START, END)
    return res


if __name__ == "__main__":
    main()
