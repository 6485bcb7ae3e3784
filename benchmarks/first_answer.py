"""A user's first answer, as a whole process: the README's script against a least-squares bootstrap (issue 18).

Each script runs in a fresh Python process; wall time (start to exit) and peak resident memory (``wait4``) are
measured from outside, and the script reports its own phases.

- ``bayescale``: the README's tour: load the bundled Chinchilla runs, ``bs.fit`` (NUTS, default settings, default
  extrapolation error) on the runs below 1e21 FLOP, ``predict`` one run (70B, 1.4T) and print the table; it also
  reports the fit's r-hat and ESS, and the time of ``predict`` with the raw posterior (so the extrapolation error's
  cost shows: the first default ``predict`` computes the fit's own leave-future-out errors).
- ``bootstrap``: what a bootstrap tool does for the same question: ``scipy.optimize.least_squares`` of the
  Chinchilla law in log space (4 starts) and ``--resamples`` case-resampling refits, then the 5-95% interval of the
  prediction (NumPy, SciPy, pandas only).
- ``simple-scaling-laws`` (the peer of issue 18, when installed: the ``bench`` extra): its Python API on the same
  runs, default settings (``separable-power``, the Chinchilla law; 1000 wild cluster bootstrap draws), one
  ``new-run`` prediction at the same point.

The first ``bayescale`` process runs with an empty persistent compilation cache (a new user); then the scripts
alternate ``--repeats`` times with the cache warm, and the table shows medians. ``--baseline DIR`` (a checkout of
an earlier commit, e.g. ``git worktree add /tmp/base COMMIT``) adds that bayescale's README script to the rotation,
from a cache of its own warmed by one untimed process: a change is then measured against its parent on the same
machine in the same minutes, which rows of tables run on other days cannot do. One more warm process, not timed,
splits the memory by step (``MEMORY``: resident memory after each import, the start of JAX's CPU backend, the fit
and the prediction; private and file-backed pages apart, Linux ``/proc/self/status``).

    python -m benchmarks.first_answer [--repeats 5] [--resamples 200] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._common import (Table, command_line, describe, fresh_process, load_json, loadavg, machine_info,
                                output_args, publish, save_json, shown)
from benchmarks._peer import version as peer_version

BAYESCALE = """
import json, sys, time
t0 = time.perf_counter()
import bayescale as bs
t1 = time.perf_counter()
runs = bs.datasets.chinchilla()
fit = bs.fit(runs[runs.C < 1e21], "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", seed=0, progress=False)
t2 = time.perf_counter()
bands = fit.predict({"N": [7e10], "D": [1.4e12]})
print(bands.table())
t3 = time.perf_counter()
fit.predict({"N": [7e10], "D": [1.4e12]}, raw=True)
t4 = time.perf_counter()
d = fit.diagnostics
print(json.dumps({"import": t1 - t0, "fit": t2 - t1, "predict": t3 - t2, "predict_raw": t4 - t3,
                  "rhat": d["max_rhat"], "ess": d["min_ess_bulk"]}), file=sys.stderr)
"""

MEMORY = """
import json, sys

def mib(key):
    with open("/proc/self/status") as fh:
        return int(next(l for l in fh if l.startswith(key + ":")).split()[1]) // 1024

steps = []
def step(name):
    steps.append({"step": name, "private": mib("RssAnon"), "files": mib("RssFile"), "peak": mib("VmHWM")})

step("interpreter")
import jax; step("import jax")
import numpyro; step("import numpyro")
import pandas; step("import pandas")
import bayescale as bs, bayescale.fit; step("import bayescale and its fitting modules (xarray, ArviZ's data)")
import arviz_stats; step("import ArviZ's statistics (a fit imports them while it samples)")
jax.numpy.zeros(1).block_until_ready(); step("JAX CPU backend started")
runs = bs.datasets.chinchilla()
fit = bs.fit(runs[runs.C < 1e21], "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", seed=0, progress=False)
fit.ok; step("fit: its compiled sampler (which its refits run too) loaded from the cache and run; diagnostics")
fit.predict({"N": [7e10], "D": [1.4e12]}); step("predict with the extrapolation error")
print(json.dumps({"steps": steps}), file=sys.stderr)
"""

BOOTSTRAP = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np, pandas as pd
from scipy.optimize import least_squares
t1 = time.perf_counter()
raw = pd.read_csv(sys.argv[1])
N, C, y = raw["Model Size"].to_numpy(float), raw["Training FLOP"].to_numpy(float), raw["loss"].to_numpy(float)
keep = C < 1e21
lnN, lnD, ly = np.log(N[keep]), np.log(C[keep] / (6 * N[keep])), np.log(y[keep])

def resid(p, a, b, t):  # ln L = ln(e^e + e^(a0 - alpha ln N) + e^(b0 - beta ln D))
    return np.logaddexp(np.logaddexp(p[0], p[1] - p[2] * a), p[3] - p[4] * b) - t

def fit(a, b, t):
    best = None
    for s in ([0.5, 6, 0.3, 7, 0.3], [0.0, 8, 0.4, 9, 0.4], [0.7, 4, 0.2, 5, 0.2], [0.3, 10, 0.5, 11, 0.5]):
        r = least_squares(resid, s, args=(a, b, t), method="lm")
        best = r if best is None or r.cost < best.cost else best
    return best.x

def pred(p):
    return float(np.exp(resid(p, np.log(7e10), np.log(1.4e12), 0.0)))

p = fit(lnN, lnD, ly)
rng = np.random.default_rng(0)
draws = [pred(fit(lnN[i], lnD[i], ly[i])) for i in (rng.integers(0, len(ly), len(ly)) for _ in range(int(sys.argv[2])))]
print(pred(p), np.quantile(draws, [0.05, 0.95]))
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "fit": t2 - t1}), file=sys.stderr)
"""

PEER = """
import json, sys, time, warnings
t0 = time.perf_counter()
import polars as pl
from simple_scaling_laws import fit
t1 = time.perf_counter()
raw = pl.read_csv(sys.argv[1]).filter(pl.col("Training FLOP") < 1e21)
runs = pl.DataFrame({"training_run_id": [f"run{i}" for i in range(raw.height)], "model_size__N": raw["Model Size"],
                     "dataset_size__D": raw["Training FLOP"] / (6 * raw["Model Size"]), "test_loss__loss": raw["loss"]})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model = fit(runs, seed=0)
    print(model.predict({"model_size__N": [7e10], "dataset_size__D": [1.4e12]}, kind="new-run"))
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "fit": t2 - t1}), file=sys.stderr)
"""


def run(repeats: int, resamples: int, baseline: Path | None = None) -> dict:
    from bayescale.datasets import path

    csv = str(path("chinchilla_epoch.csv"))
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as base_cache:
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "BAYESCALE_JAX_CACHE": cache}
        base_env = {**env, "BAYESCALE_JAX_CACHE": base_cache}
        cold = fresh_process(BAYESCALE, [], env)
        if baseline is not None:
            fresh_process(BAYESCALE, [], base_env, baseline)  # its cache warmed, untimed
        warm, boot, peer, base, version = [], [], [], [], peer_version()
        for _ in range(repeats):  # alternate, so drifts in the machine's load hit all alike
            warm.append(fresh_process(BAYESCALE, [], env))
            if baseline is not None:
                base.append(fresh_process(BAYESCALE, [], base_env, baseline))
            boot.append(fresh_process(BOOTSTRAP, [csv, str(resamples)], env))
            if version:
                peer.append(fresh_process(PEER, [csv], env))
        memory = fresh_process(MEMORY, [], env)["steps"] if Path("/proc/self/status").exists() else []
    out = {"cold": cold, "warm": warm, "bootstrap": boot, "peer": peer, "peer_version": version, "memory": memory}
    if baseline is not None:
        rev = subprocess.run(["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        out["baseline"] = {"revision": rev or str(baseline), "warm": base}
    return out


def _median(rows: list, key: str) -> float:
    return float(np.median([r[key] for r in rows]))


def tables(out):
    path = out / "first_answer.json"
    if not path.exists():
        return []
    res = load_json(path)
    cold, warm, boot = res["cold"], res["warm"], res["bootstrap"]
    med = lambda k, rows=warm: _median(rows, k)  # noqa: E731

    def warm_row(label, runs):  # bayescale's warm processes: medians of each phase, the worst sampling quality
        return [f"{label}, warm cache (median of {len(runs)})", f"{med('wall', runs):.2f}",
                f"{med('import', runs):.2f}", f"{med('fit', runs):.2f}",
                f"{med('predict', runs):.2f} ({med('predict_raw', runs):.2f} raw)",
                f"{med('peak_mib', runs):.0f}",
                f"r-hat {max(r['rhat'] for r in runs):.3f}, ESS {min(r['ess'] for r in runs):.0f}"]

    def ratio_row(label, runs):
        return [f"bayescale warm / {label}", f"{med('wall') / med('wall', runs):.2f}", "", "", "",
                f"{med('peak_mib') / med('peak_mib', runs):.2f}", ""]

    rows = [
        ["bayescale, first process (empty compilation cache)", f"{cold['wall']:.2f}", f"{cold['import']:.2f}",
         f"{cold['fit']:.2f}", f"{cold['predict']:.2f} ({cold['predict_raw']:.2f} raw)", f"{cold['peak_mib']:.0f}",
         f"r-hat {cold['rhat']:.3f}, ESS {cold['ess']:.0f}"],
        warm_row("bayescale", warm),
        [f"least-squares bootstrap, {res['resamples']} resamples (median of {len(boot)})", f"{med('wall', boot):.2f}",
         f"{med('import', boot):.2f}", f"{med('fit', boot):.2f}", "", f"{med('peak_mib', boot):.0f}", ""],
        ratio_row("bootstrap", boot),
    ]
    if res.get("baseline"):
        b, rev = res["baseline"]["warm"], res["baseline"]["revision"]
        rows[2:2] = [warm_row(f"bayescale at {rev}", b)]
        rows.append(ratio_row(f"bayescale at {rev}", b))
    peer = res.get("peer")
    if peer:
        rows[2:2] = [[f"simple-scaling-laws {res['peer_version']}, 1000 draws (median of {len(peer)})",
                      f"{med('wall', peer):.2f}", f"{med('import', peer):.2f}", f"{med('fit', peer):.2f}", "",
                      f"{med('peak_mib', peer):.0f}", ""]]
        rows.append(ratio_row("simple-scaling-laws (goal <= 1)", peer))
    head = ["process", "wall s", "import s", "fit s", "predict s", "peak MiB (goal < 400)", "sampling quality"]
    m = res["machine"]
    source = (f"{describe(m)}; fresh Python processes, alternating; load average {m.get('loadavg_start')} at "
              "start, "
              f"{res.get('loadavg_end')} at end; {shown(path)}")
    tables_ = [Table("first_answer", m["command"], source, head, rows)]
    if res.get("memory"):
        steps, before = res["memory"], None
        mrows = []
        for st in steps:
            total = st["private"] + st["files"]
            mrows.append([st["step"], f"{st['private']}", f"{st['files']}", f"{total}",
                          "" if before is None else f"{total - before:+d}", f"{st['peak']}"])
            before = total
        tables_.append(Table("first_answer_memory", m["command"], (
            "one more warm process, not timed: resident memory after each step (MiB; private = anonymous pages, "
            f"files = pages of the libraries' files, shared with other processes); {shown(path)}"),
            ["after", "private MiB", "files MiB", "resident MiB", "step adds", "peak so far MiB"], mrows))
    return tables_


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.first_answer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a checkout of another commit of bayescale, timed alternately with this one")
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("first_answer", argv))
    meta["loadavg_start"] = loadavg()
    if args.baseline is not None and not (args.baseline / "bayescale" / "__init__.py").is_file():
        ap.error(f"--baseline {args.baseline}: not a checkout of bayescale (no bayescale/__init__.py in it)")
    res = run(args.repeats, args.resamples, args.baseline)
    save_json(args.out / "first_answer.json", {"machine": meta, "resamples": args.resamples, **res,
                                               "loadavg_end": loadavg()})
    publish(tables, args)


if __name__ == "__main__":
    main()
