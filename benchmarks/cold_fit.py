"""A first fit in a new process with an empty compilation cache, per law and noise model (issue 18).

What a new user waits for before their first answer, and what every test that fits pays in a clean CI run: tracing
and compiling the sampler's programs (``bayescale/sampler.py``) before NUTS runs. Each case is one fresh Python
process with an empty persistent compilation cache (``BAYESCALE_JAX_CACHE``) that imports bayescale, builds the runs
and times ``bs.fit`` (default NUTS settings, the raw posterior: no refits), reporting r-hat and ESS. Cases:

- ``chinchilla``: the README's fit, the bundled Chinchilla runs below 1e21 FLOP, default (log-Student-t) noise;
- ``chinchilla-lognormal``: the same runs and law with lognormal noise;
- ``kaplan``: the same runs under Kaplan's law (its ``w`` has a Beta prior), default noise;
- ``M4``: one simulated loss curve of 12 runs under the M4 law, default noise;
- ``sigmoid-beta``: a downstream accuracy against compute (12 runs, the three smallest exactly 0) under the sigmoid
  law with beta noise.

``--baseline DIR`` (a checkout of an earlier commit, e.g. ``git worktree add /tmp/base COMMIT``) runs every case
there too, alternating with this checkout, each process with its own empty cache. Medians of ``--repeats``.

    python -m benchmarks.cold_fit [--repeats 2] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._common import (ROOT, Table, command_line, describe, fresh_process, load_json, loadavg,
                                machine_info, output_args, publish, save_json, shown)

SCRIPT = """
import json, sys, time
import numpy as np, pandas as pd
import bayescale as bs
case = sys.argv[1]
kw = dict(seed=0, progress=False, error="raw")
if case.startswith("chinchilla") or case == "kaplan":
    runs = bs.datasets.chinchilla()
    args = (runs[runs.C < 1e21], "kaplan" if case == "kaplan" else "chinchilla")
    kw.update(inputs={"N": "N", "D": "D"}, y="loss")
    if case == "chinchilla-lognormal":
        kw["likelihood"] = "lognormal"
elif case == "M4":
    x = np.geomspace(1e7, 1e10, 12)
    y = 1.7 + 8.0 * (x / 1e7) ** -0.3 * np.exp(np.random.default_rng(0).normal(0, 0.01, 12))
    args = (pd.DataFrame({"x": x, "y": y}), "M4")
    kw.update(x="x", y="y")
else:
    c = np.geomspace(1e18, 1e23, 12)
    rng = np.random.default_rng(0)
    acc = np.clip(0.02 + 0.6 / (1 + np.exp(-(np.log(c) - np.log(3e21)))) + rng.normal(0, 0.03, 12), 0, 1)
    acc[:3] = 0
    args = (pd.DataFrame({"C": c, "acc": acc}), "sigmoid")
    kw.update(x="C", y="acc", likelihood="beta")
t = time.perf_counter()
fit = bs.fit(*args, **kw)
d = fit.diagnostics
print(json.dumps({"fit": time.perf_counter() - t, "rhat": d["max_rhat"], "ess": d["min_ess_bulk"]}), file=sys.stderr)
"""

CASES = ("chinchilla", "chinchilla-lognormal", "kaplan", "M4", "sigmoid-beta")


def run(repeats: int, baseline: Path | None = None) -> dict:
    trees = {"this": ROOT} | ({"baseline": baseline} if baseline is not None else {})
    out = {name: {case: [] for case in CASES} for name in trees}
    for _ in range(repeats):
        for case in CASES:
            for name, tree in trees.items():  # alternate, so drifts in the machine's load hit both alike
                with tempfile.TemporaryDirectory() as cache:
                    env = {**os.environ, "JAX_PLATFORMS": "cpu", "BAYESCALE_JAX_CACHE": cache}
                    out[name][case].append(fresh_process(SCRIPT, [case], env, tree))
    if baseline is not None:
        rev = subprocess.run(["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        out["baseline_revision"] = rev or str(baseline)
    return out


def tables(out):
    path = out / "cold_fit.json"
    if not path.exists():
        return []
    res = load_json(path)
    base = res.get("baseline")
    rev = res.get("baseline_revision", "")
    rows = []
    for case in CASES:
        this = res["this"][case]
        med = float(np.median([r["fit"] for r in this]))
        row = [case, f"{med:.1f}", f"{np.median([r['wall'] for r in this]):.1f}",
               f"{max(r['rhat'] for r in this):.3f} / {min(r['ess'] for r in this):.0f}"]
        if base:
            b = base[case]
            bmed = float(np.median([r["fit"] for r in b]))
            row += [f"{bmed:.1f}", f"{max(r['rhat'] for r in b):.3f} / {min(r['ess'] for r in b):.0f}",
                    f"{med / bmed:.2f}"]
        rows.append(row)
    head = ["case", "first fit s", "process s", "r-hat / ESS"]
    if base:
        head += [f"first fit s at {rev}", f"r-hat / ESS at {rev}", "ratio"]
    m = res["machine"]
    n = len(res["this"][CASES[0]])
    source = (f"{describe(m)}; each a fresh process with an empty compilation cache, median of {n}"
              f"{', alternating with the baseline' if base else ''}; load average {m.get('loadavg_start')} at start, "
              f"{res.get('loadavg_end')} at end; {shown(path)}")
    return [Table("cold_fit", m["command"], source, head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold_fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a checkout of another commit of bayescale, timed alternately with this one")
    output_args(ap)
    args = ap.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "bayescale" / "__init__.py").is_file():
        ap.error(f"--baseline {args.baseline}: not a checkout of bayescale (no bayescale/__init__.py in it)")
    meta = machine_info(command_line("cold_fit", argv))
    res = run(args.repeats, args.baseline)
    save_json(args.out / "cold_fit.json", {"machine": meta, **res, "loadavg_end": loadavg()})
    publish(tables, args)


if __name__ == "__main__":
    main()
