"""How many curves to vectorise at once in ``fit_many`` on this machine.

Fits the first ``--curves`` IC curves of the revisiting benchmark (fit split) with M4 for each batch size, twice
(the first call compiles, the second reuses the program), and reports times, the share of fits passing the
diagnostics gate and the mean leapfrog steps per draw. Writes ``benchmarks/results/batching.json`` and the
``batching`` table of ``benchmarks/RESULTS.md``.

    python -m benchmarks.batching [--sizes 1,4,16] [--curves 16] [--draws 300] [--law M4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._common import (LEGACY_LIKELIHOOD, RESULTS, Table, command_line, describe, load_json, machine_info,
                                output_args, publish, save_json, shown)


def run(sizes, n_curves: int, draws: int, law: str) -> list[dict]:
    import bayescale as bs

    r = bs.datasets.revisiting()
    ic = r[(r.domain == "IC") & r.train]
    runs = ic[ic["curve"].isin(list(ic["curve"].unique())[:n_curves])]
    rows = []
    for size in sizes:
        times = []
        for seed in (0, 1):
            t0 = time.perf_counter()
            fits = bs.fit_many(runs, law, group="curve", x="x", y="y", chains=4, warmup=draws, samples=draws,
                               seed=seed, progress=False, refit_flagged=False, batch_size=size,
                               likelihood=LEGACY_LIKELIHOOD)
            times.append(time.perf_counter() - t0)
        s = fits.summary()
        rows.append({"batch_size": size, "curves": len(fits), "first_s": times[0], "second_s": times[1],
                     "per_curve_s": times[1] / len(fits), "ok_share": float(s["ok"].mean()),
                     "mean_leapfrog_steps": float(np.mean([f.diagnostics["mean_steps"] for f in fits.values()]))})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / "batching.json")
    if res is None:
        return []
    m = res["machine"]
    return [Table("batching", m["command"], f"{describe(m)}; {shown(out / 'batching.json')}",
                  ["curves per batch", "first call s", "second call s", "s per curve", "ok", "leapfrog steps/draw"],
                  [[r["batch_size"], f"{r['first_s']:.1f}", f"{r['second_s']:.1f}", f"{r['per_curve_s']:.2f}",
                    f"{r['ok_share']:.0%}", f"{r['mean_leapfrog_steps']:.1f}"] for r in res["results"]])]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.batching", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,4,16")
    ap.add_argument("--curves", type=int, default=16)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--law", default="M4")
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("batching", argv))
    rows = run([int(v) for v in args.sizes.split(",")], args.curves, args.draws, args.law)
    save_json(args.out / "batching.json", {"machine": meta, "results": rows})
    publish(tables, args)


if __name__ == "__main__":
    main()
