"""Extrapolation benchmark on real scaling-law data: accuracy, calibration and cost of every method.

Suites (bundled data, :mod:`bayescale.datasets`):

- ``revisiting``: Alabdulmohsin et al. 2022, 92 curves (IC 72, NMT 5, LM 5, BB 10), official split (``train``).
- ``colpret``: 192 loss-vs-tokens curves; fit the first half of each curve, predict the second half.
- ``chinchilla``: 245 runs; fit compute < 1e21 FLOP, predict the 23 larger runs (laws in N, D or C, M).
- ``gadre``: per corpus fit N <= 411M, predict the 1.4B and 6.9B runs: C4 validation loss (domain ``loss``) and
  average downstream top-1 error from the observed loss via the loss -> error law (domain ``downstream``).

Methods: ``nuts:<law>`` (every applicable family; the raw posterior, ``error="raw"``: the package's default bands,
with the corpus-learned extrapolation error, are scored by :mod:`benchmarks.honest_bands`), ``cal:<law>`` (the
same plus the extrapolation discrepancy of ``calibrate()``, per domain on the fit runs), ``local:<law>`` (then
refitted locally around the targets' inputs), ``bma`` (stacking average of the cached NUTS families, per curve,
weights from PSIS-LOO), ``ls:<law>`` (multi-start least squares, lognormal residual noise), ``boot:<law>``
(bootstrap of least squares), ``pfn`` (when :mod:`bayescale.pfn` is available),
``all``.

    python -m benchmarks.extrapolation --standard   # every suite and method of STANDARD, then the tables and plots
    python -m benchmarks.extrapolation --suite revisiting --method nuts:M4 [--domain IC] [--limit 10] [--seed 0]
    python -m benchmarks.extrapolation --plots      # the figures again, from the cache
    python -m benchmarks.extrapolation --self-check

Each (suite, method) writes ``benchmarks/results/<suite>__<method>.json`` (``:`` in the method becomes ``-``); NUTS
runs cache each curve's predictive draws and pointwise LOO under ``benchmarks/results/cache/`` (ignored by git) so
``bma`` reuses them without refitting. The ``extrapolation*`` tables of ``RESULTS.md`` show the files of
``STANDARD``: what ``--standard`` writes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._common import LEGACY_LIKELIHOOD, RESULTS, command_line, loadavg, output_args, publish, save_json

LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
ONE_INPUT = ("M1", "M2", "M3", "M4", "BNSL1", "BNSL2")
LOSS_ND = ("chinchilla", "kaplan", "overtrain")
SUITES = ("revisiting", "colpret", "chinchilla", "gadre")
BASELINE_LAWS = ("M1", "M2", "M3", "M4", "BNSL1")
# NUTS settings of the benchmark (4 chains x (300 warm-up + 300 draws), as benchmarks/batching.py measured)
NUTS = dict(chains=4, warmup=300, samples=300)
DRAWS = 1000  # predictive draws kept per curve
GRID = 60  # plot grid points (one-input suites)
_LS = tuple(f"{k}:{law}" for k in ("boot", "ls") for law in LOSS_ND)
# What --standard runs and the tables show: suite -> (curves per domain, None = all; methods, bma after the NUTS ones)
STANDARD = {
    "revisiting": (None, ("nuts:M1", "nuts:M2", "nuts:M3", "nuts:M4", "nuts:BNSL1", "cal:M3", "local:M3", "bma", "pfn",
                          "boot:M4", "boot:BNSL1", "ls:M2", "ls:M3", "ls:M4", "ls:BNSL1")),
    "colpret": (12, ("nuts:M2", "nuts:M3", "nuts:M4", "bma", "pfn", "boot:M4", "ls:M4")),
    "chinchilla": (None, (*(f"nuts:{law}" for law in LOSS_ND), "cal:chinchilla", "local:chinchilla", "bma", *_LS)),
    "gadre": (None, (*(f"nuts:{law}" for law in (*LOSS_ND, "downstream")), "cal:chinchilla", "cal:overtrain",
                     "cal:downstream", "bma", *_LS, "boot:downstream", "ls:downstream")),
}
STANDARD_COMMAND = "python -m benchmarks.extrapolation --standard"


def result_name(suite: str, method: str) -> str:
    return f"{suite}__{method.replace(':', '-')}.json"


@dataclass
class Task:
    """One curve to extrapolate: context runs (fit), target runs (predict), and NSL-PFN's y unit ``c``."""

    suite: str
    domain: str
    curve: str
    ctx: pd.DataFrame  # input columns + y
    tgt: pd.DataFrame
    inputs: tuple
    nsl_c: float = 1.0
    laws: tuple = field(default_factory=tuple)


# -- suites ------------------------------------------------------------------------------------------------
def load_suite(suite: str, domain: str | None = None, limit: int | None = None) -> list[Task]:
    """The suite's curves as :class:`Task` s, optionally one ``domain`` and the first ``limit`` curves per domain."""
    import bayescale as bs

    tasks: list[Task] = []
    if suite == "revisiting":
        r = bs.datasets.revisiting()
        for c, d in r.groupby("curve", sort=False):
            d = d.sort_values("x")
            tasks.append(Task(suite, d["domain"].iloc[0], c, d[d.train][["x", "y"]].reset_index(drop=True),
                              d[~d.train][["x", "y"]].reset_index(drop=True), ("x",), 1.0, ONE_INPUT))
    elif suite == "colpret":
        r = bs.datasets.colpret().rename(columns={"tokens": "x", "loss": "y"})
        for c, d in r.groupby("curve", sort=False):
            d = d.sort_values("x")
            ctx = d[d.context][["x", "y"]].reset_index(drop=True)
            tasks.append(Task(suite, "ColPret", c, ctx, d[~d.context][["x", "y"]].reset_index(drop=True), ("x",),
                              float(ctx["y"].max()), ONE_INPUT))
    elif suite == "chinchilla":
        r = bs.datasets.chinchilla().rename(columns={"loss": "y"})
        r["M"] = r["D"] / r["N"]
        cols = ["N", "D", "C", "M", "y"]
        tasks.append(Task(suite, "Chinchilla", "chinchilla", r[r.C < 1e21][cols].reset_index(drop=True),
                          r[r.C >= 1e21][cols].reset_index(drop=True), ("N", "D", "C", "M"), 1.0, LOSS_ND))
    elif suite == "gadre":
        g = bs.datasets.gadre_downstream()
        for corpus, d in g.groupby("dataset", sort=True):
            small = d["N"] <= 4.2e8
            cols = ["N", "D", "C", "M"]
            loss = d[cols + ["loss"]].rename(columns={"loss": "y"})
            tasks.append(Task(suite, "loss", corpus, loss[small].reset_index(drop=True),
                              loss[~small].reset_index(drop=True), tuple(cols), 1.0, LOSS_ND))
            err = pd.DataFrame({"L": d["loss"], "y": d["err"]})
            tasks.append(Task(suite, "downstream", corpus, err[small].reset_index(drop=True),
                              err[~small].reset_index(drop=True), ("L",), 1.0, ("downstream",)))
    else:
        raise SystemExit(f"unknown suite {suite!r}; choose one of {', '.join(SUITES)}")
    if domain is not None:
        known = sorted({t.domain for t in tasks})
        tasks = [t for t in tasks if t.domain == domain]
        if not tasks:
            raise SystemExit(f"suite {suite!r} has no domain {domain!r}; choose one of {known}")
    if limit is not None:
        seen: dict = {}
        keep = []
        for t in tasks:
            seen[t.domain] = seen.get(t.domain, 0) + 1
            if seen[t.domain] <= limit:
                keep.append(t)
        tasks = keep
    return tasks


def methods_for(suite: str) -> list[str]:
    """Every method of ``--method all`` for a suite."""
    laws = {"revisiting": ONE_INPUT, "colpret": ONE_INPUT, "chinchilla": LOSS_ND,
            "gadre": (*LOSS_ND, "downstream")}[suite]
    base = BASELINE_LAWS if suite in ("revisiting", "colpret") else laws
    out = [f"nuts:{law}" for law in laws] + ["bma"] + [f"ls:{law}" for law in base] + [f"boot:{law}" for law in base]
    return out + (["pfn"] if pfn_available() else [])


def pfn_available() -> bool:
    import importlib

    try:
        pfn = importlib.import_module("bayescale.pfn")
    except Exception:
        return False
    try:
        return bool(pfn.available())
    except Exception:
        return False


def grid_for(task: Task) -> pd.DataFrame | None:
    """Plot grid from the smallest context to the largest target input (one-input suites only)."""
    if task.inputs != ("x",):
        return None
    lo, hi = task.ctx["x"].min(), max(task.ctx["x"].max(), task.tgt["x"].max())
    return pd.DataFrame({"x": np.geomspace(lo, hi, GRID)})


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)


def cache_path(cache: Path, suite: str, law: str, task: Task) -> Path:
    return cache / suite / law / f"{_safe(task.domain)}__{_safe(task.curve)}.npz"


def save_cache(cache: Path, key: str, task: Task, pred: np.ndarray, **arrays) -> None:
    """Cache a method's per-curve outputs: 5/50/95% of the targets' predictive (``tgt_q``) plus ``arrays``."""
    p = cache_path(cache, task.suite, key, task)
    p.parent.mkdir(parents=True, exist_ok=True)
    tgt_q = np.quantile(pred, [0.05, 0.5, 0.95], axis=0)
    np.savez_compressed(p, tgt_q=tgt_q, **{k: (v.astype(np.float32) if k.endswith("draws") else v)
                                           for k, v in arrays.items()})


# -- scoring of one prediction -----------------------------------------------------------------------------
def score(task: Task, draws: np.ndarray, logpd: np.ndarray, median: np.ndarray | None = None) -> dict:
    """Every per-curve metric from predictive draws (S, m) and the exact log density (m,) of the targets."""
    from bayescale import scoring

    y = task.tgt["y"].to_numpy(float)
    med = np.median(draws, axis=0) if median is None else median
    q = np.quantile(draws, [(1 - lv) / 2 for lv in LEVELS] + [(1 + lv) / 2 for lv in LEVELS], axis=0)
    lo, hi = q[: len(LEVELS)], q[len(LEVELS):]
    cov = scoring.coverage(lo, hi, y)
    i90 = LEVELS.index(0.9)
    return {
        "domain": task.domain, "curve": task.curve, "n_ctx": len(task.ctx), "n_tgt": len(y),
        "rmsle": float(scoring.rmsle(np.maximum(med, 1e-300), y)),
        "ll": float(np.mean(logpd)),
        "ll_nsl": float(np.mean(scoring.rescale_log_density(logpd, task.nsl_c))),
        "coverage": {str(lv): float(c) for lv, c in zip(LEVELS, cov)},
        "msce": scoring.msce(LEVELS, cov),
        "width90": scoring.interval_width(lo[i90], hi[i90]),
        "crps": float(np.mean(scoring.crps_from_draws(draws, y))),
    }


# -- methods ------------------------------------------------------------------------------------------------
def run_nuts(law_name: str, tasks: list[Task], seed: int, cache: Path, settings: dict,
             calibrated: bool = False, local: bool = False) -> list[dict]:
    """One ``fit_many`` over the tasks; per curve: draws, exact log density, pointwise LOO -> cache + scores.

    ``calibrated`` (method ``cal:<law>``): add the extrapolation discrepancy of :mod:`bayescale.discrepancy`, one
    ``tau`` per domain from leave-future-out on the curves' fit runs (the largest 25% of each context held out;
    the smallest for the loss -> error link, which extrapolates to lower loss). The targets are never used.
    ``local`` (method ``local:<law>``): calibrated as above, then each curve refitted locally around its target
    points (``Fit.localize``: each fit run carries tau x its distance in decades from them), and the local fits'
    own extrapolation error calibrated the same way (pooled per domain), the larger of the two taus kept; the
    targets' inputs are used, never their outcomes.
    """
    import arviz as az

    import bayescale as bs

    law = bs.get_law(law_name)
    tasks = [t for t in tasks if law_name in t.laws]
    if not tasks:
        return []
    frames = []
    for i, t in enumerate(tasks):
        frames.append(t.ctx.assign(_g=i))
    runs = pd.concat(frames, ignore_index=True)
    t0 = time.perf_counter()
    fits = bs.fit_many(runs, law, group="_g", inputs={k: k for k in law.input_names}, y="y", seed=seed,
                       refit_flagged=False, progress=False, error="raw", likelihood=LEGACY_LIKELIHOOD, **settings)
    taus = {}
    if calibrated or local:
        toward = "min" if law_name == "downstream" else "max"
        for dom in sorted({t.domain for t in tasks}):
            idx = [i for i, t in enumerate(tasks) if t.domain == dom]
            cal = bs.FitMany({i: fits[i] for i in idx}, law, []).calibrate(holdout=0.25, toward=toward, seed=seed,
                                                                          **settings)
            for i in idx:
                fits[i] = cal[i]
            taus[dom] = next(iter(cal.values())).discrepancy
            print(f"cal:{law_name} {dom}: tau {taus[dom]:.4g} per decade", file=sys.stderr)
    if local:
        for i, t in enumerate(tasks):
            if fits[i].discrepancy > 0:
                fits[i] = fits[i].localize(t.tgt[list(law.input_names)], seed=seed, recalibrate=False, **settings)
        for dom in sorted({t.domain for t in tasks}):   # the local fits' own extrapolation error, pooled per domain
            idx = [i for i, t in enumerate(tasks) if t.domain == dom and fits[i].local is not None]
            if idx:
                cal = bs.FitMany({i: fits[i] for i in idx}, law, []).calibrate(holdout=0.25, toward=toward, seed=seed,
                                                                              **settings)
                for i in idx:   # the larger of the global and the local fits' tau, as Fit.localize(recalibrate=True)
                    fits[i] = cal[i].with_discrepancy(max(cal[i].discrepancy, taus[dom]))
                print(f"local:{law_name} {dom}: tau of the local fits {cal[idx[0]].discrepancy:.4g} per decade "
                      f"(global {taus[dom]:.4g}; the larger is used)", file=sys.stderr)
    fit_s = time.perf_counter() - t0
    key = f"local-{law_name}" if local else f"cal-{law_name}" if calibrated else law_name
    rows = []
    for i, t in enumerate(tasks):
        t1 = time.perf_counter()
        f = fits[i]
        at = t.tgt[list(law.input_names)]
        _, _, obs = f.predictive_draws(at, seed=seed, max_draws=DRAWS)
        logpd = f.log_predictive_density(at, t.tgt["y"].to_numpy(), max_draws=DRAWS)
        loo_i = np.asarray(az.loo(f.idata, pointwise=True).elpd_i.values, float).reshape(-1)
        grid = grid_for(t)
        gd = f.predictive_draws(grid, seed=seed, max_draws=400)[2] if grid is not None else np.zeros((0, 0))
        save_cache(cache, key, t, obs, draws=obs, logpd=logpd, loo_i=loo_i, grid_draws=gd, ok=f.ok)
        row = score(t, obs, logpd)
        d = f.diagnostics
        row.update(ok=bool(f.ok), max_rhat=d["max_rhat"], divergences=d["divergences"], tau=f.discrepancy,
                   seconds=fit_s / len(tasks) + time.perf_counter() - t1)
        rows.append(row)
    return rows


def stacking_weights(loo: np.ndarray) -> np.ndarray:
    """Stacking weights (Yao et al. 2018) from pointwise LOO log densities ``(n, K)``: max sum_i log sum_k w_k p_ik."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp, softmax

    k = loo.shape[1]
    if k == 1:
        return np.ones(1)

    def neg(v):
        w = softmax(np.concatenate([[0.0], v]))
        return -np.sum(logsumexp(loo + np.log(np.maximum(w, 1e-300))[None, :], axis=1))

    sol = minimize(neg, np.zeros(k - 1), method="L-BFGS-B")
    return softmax(np.concatenate([[0.0], sol.x]))


def run_bma(tasks: list[Task], seed: int, cache: Path) -> list[dict]:
    """Per curve: stacking average of every NUTS family cached for it (no refit)."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(seed)
    rows = []
    for t in tasks:
        t1 = time.perf_counter()
        laws = [law for law in t.laws if cache_path(cache, t.suite, law, t).exists()]
        if not laws:
            print(f"bma: no cached NUTS fits for {t.curve}; run the nuts:<law> methods first", file=sys.stderr)
            continue
        zs = [np.load(cache_path(cache, t.suite, law, t)) for law in laws]
        w = stacking_weights(np.stack([z["loo_i"] for z in zs], axis=1))
        counts = rng.multinomial(DRAWS, w)
        draws = np.concatenate([z["draws"][rng.choice(len(z["draws"]), c)] for z, c in zip(zs, counts) if c],
                               axis=0).astype(float)
        logpd = logsumexp(np.stack([z["logpd"] for z in zs]) + np.log(np.maximum(w, 1e-300))[:, None], axis=0)
        row = score(t, draws, logpd)
        row.update(weights={law: float(v) for law, v in zip(laws, w)},
                   ok=bool(all(bool(z["ok"]) for z, v in zip(zs, w) if v > 0.01)),
                   seconds=time.perf_counter() - t1)
        gd = np.zeros((0, 0))
        if zs[0]["grid_draws"].size:
            gc = rng.multinomial(400, w)
            gd = np.concatenate([z["grid_draws"][rng.choice(len(z["grid_draws"]), c)] for z, c in zip(zs, gc) if c])
        save_cache(cache, "bma", t, draws, grid_draws=gd)
        rows.append(row)
    return rows


def run_ls(kind: str, law_name: str, tasks: list[Task], seed: int, cache: Path, n_boot: int) -> list[dict]:
    """``ls`` or ``boot`` of ``law_name`` on every task it applies to."""
    import bayescale as bs
    from bayescale import scoring

    from benchmarks._extrap_ls import boot_predictive, ls_predictive

    law = bs.get_law(law_name)
    rows = []
    for t in tasks:
        if law_name not in t.laws and law_name not in BASELINE_LAWS:
            continue
        if set(law.input_names) - set(t.ctx.columns):
            continue
        t1 = time.perf_counter()
        grid = grid_for(t)
        try:
            if kind == "ls":
                out = ls_predictive(law, t.ctx, t.tgt, seed, grid=grid)
            else:
                out = boot_predictive(law, t.ctx, t.tgt, seed, n_boot=n_boot, grid=grid)
        except RuntimeError as exc:
            print(f"{kind}:{law_name} {t.curve}: {exc}", file=sys.stderr)
            rows.append({"domain": t.domain, "curve": t.curve, "failed": str(exc)})
            continue
        y = t.tgt["y"].to_numpy(float)
        logpd = scoring.lognormal_mixture_logpdf(y, out["log_mu"], out["sigma"])
        row = score(t, out["draws"], logpd, median=out["point"] if kind == "ls" else None)
        row.update(ok=True, seconds=time.perf_counter() - t1)
        save_cache(cache, f"{kind}-{law_name}", t, out["draws"], grid_draws=out.get("grid_draws", np.zeros((0, 0))))
        rows.append(row)
    return rows


def run_pfn(tasks: list[Task], seed: int) -> list[dict]:
    """The PFN extrapolator (``bayescale.pfn.predictive``) on the one-input curves."""
    import importlib

    pfn = importlib.import_module("bayescale.pfn")

    rows = []
    for t in tasks:
        if t.inputs != ("x",):
            continue
        t1 = time.perf_counter()
        pred = pfn.predictive(t.ctx["x"].to_numpy(float), t.ctx["y"].to_numpy(float), t.tgt["x"].to_numpy(float),
                              seed=seed)
        draws = np.asarray(pred.sample(DRAWS, seed), float)
        logpd = np.asarray(pred.logpdf(t.tgt["y"].to_numpy(float)), float)
        med = np.asarray(pred.quantile(np.array([0.5])), float)[0]
        row = score(t, draws, logpd, median=med)
        row.update(ok=True, seconds=time.perf_counter() - t1)
        rows.append(row)
    return rows


# -- aggregation ----------------------------------------------------------------------------------------------
METRICS = ("rmsle", "ll", "ll_nsl", "msce", "width90", "crps", "seconds")


def aggregate(rows: list[dict]) -> dict:
    """Mean and standard error of each metric per domain and pooled; point-weighted pooled coverage."""
    from bayescale import scoring

    rows = [r for r in rows if "failed" not in r]
    out = {}
    groups = {"pooled": rows}
    for r in rows:
        groups.setdefault(r["domain"], []).append(r)
    for name, rs in groups.items():
        if not rs:
            continue
        agg = {"curves": len(rs), "points": int(sum(r["n_tgt"] for r in rs))}
        for m in METRICS:
            v = np.array([r[m] for r in rs if m in r], float)
            if len(v):
                agg[m] = float(v.mean())
                agg[f"{m}_se"] = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
        agg["coverage"] = {str(lv): float(np.mean([r["coverage"][str(lv)] for r in rs])) for lv in LEVELS}
        n = np.array([r["n_tgt"] for r in rs], float)
        pc = [float(np.sum(n * [r["coverage"][str(lv)] for r in rs]) / n.sum()) for lv in LEVELS]
        agg["coverage_points"] = dict(zip(map(str, LEVELS), pc))
        agg["msce_points"] = scoring.msce(LEVELS, pc)
        agg["ok_rate"] = float(np.mean([bool(r.get("ok", True)) for r in rs]))
        out[name] = agg
    return out


def machine() -> dict:
    import jax

    import bayescale
    from bayescale.config import cpu_model

    return {"bayescale": bayescale.__version__, "python": platform.python_version(), "jax": jax.__version__,
            "backend": jax.default_backend(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "cpu_model": cpu_model()}


def run_method(suite: str, method: str, tasks: list[Task], seed: int, cache: Path, settings: dict,
               n_boot: int) -> list[dict]:
    kind, _, law = method.partition(":")
    if kind in ("nuts", "cal", "local"):
        return run_nuts(law, tasks, seed, cache, settings, calibrated=kind == "cal", local=kind == "local")
    if kind == "bma":
        return run_bma(tasks, seed, cache)
    if kind in ("ls", "boot"):
        return run_ls(kind, law, tasks, seed, cache, n_boot)
    if kind == "pfn":
        if not pfn_available():
            print("pfn: bayescale.pfn is not available; skipped", file=sys.stderr)
            return []
        return run_pfn(tasks, seed)
    raise SystemExit(f"unknown method {method!r}; use nuts:<law>, cal:<law>, local:<law>, bma, ls:<law>, boot:<law>, "
                     "pfn or all")


def _pfn_weights() -> dict | str:
    import importlib

    try:
        info = importlib.import_module("bayescale.pfn").load().info
        w = {k: info.get(k) for k in ("config_name", "step", "total_steps", "sha256", "val_nll")}
        rc = info.get("recalibration")  # run_pfn uses the default, recalibrated predictive
        w["recalibration"] = (f"{sum(rc['curves'].values())} prior curves, seeds {rc['seed_range'][0]}-"
                              f"{rc['seed_range'][1]}" if rc else None)
        return w
    except Exception as exc:  # the weights' description is informative only
        return f"unknown ({type(exc).__name__})"


def run_and_save(suite: str, method: str, tasks: list[Task], limit: int | None, args, command: str) -> dict | None:
    """One method on one suite's tasks: scores per curve and aggregated, written to ``args.out``."""
    settings = dict(chains=args.chains, warmup=args.warmup, samples=args.samples)
    load0, t0, c0 = loadavg(), time.perf_counter(), time.process_time()
    rows = run_method(suite, method, tasks, args.seed, args.out / "cache", settings, args.boot)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if not rows:
        print(f"{suite} {method}: no applicable curves", file=sys.stderr)
        return None
    res = {"suite": suite, "method": method, **({"pfn_weights": _pfn_weights()} if method == "pfn" else {}),
           "seed": args.seed, "domain": args.domain, "limit": limit,
           "settings": {**settings, "draws_kept": DRAWS, "boot": args.boot, "levels": list(LEVELS)},
           "command": command, "machine": machine(), "loadavg_start": load0, "loadavg_end": loadavg(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": wall, "cpu_s": cpu,
           "aggregate": aggregate(rows), "curves": rows}
    path = args.out / result_name(suite, method)
    save_json(path, res)
    a = res["aggregate"]["pooled"]
    print(f"{suite} {method}: {a['curves']} curves, RMSLE {a['rmsle']:.4f}, LL {a['ll']:.3f}, "
          f"cov90 {a['coverage']['0.9']:.3f}, MSCE {a['msce']:.4f}, {wall:.0f} s -> {path}", flush=True)
    return res


def tables(out: Path = RESULTS) -> list:
    from benchmarks._extrap_table import tables as extrapolation_tables

    return extrapolation_tables(out)


def plots(out: Path = RESULTS) -> list[str]:
    from benchmarks._extrap_table import load_results, plots as draw

    return draw(out, load_results(out))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.extrapolation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--standard", action="store_true", help="every suite and method of STANDARD, then the tables")
    ap.add_argument("--suite", choices=SUITES)
    ap.add_argument("--method", default="all",
                    help="nuts:<law> | cal:<law> | local:<law> | bma | ls:<law> | boot:<law> | pfn | all")
    ap.add_argument("--domain")
    ap.add_argument("--limit", type=int, help="first N curves per domain")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chains", type=int, default=NUTS["chains"])
    ap.add_argument("--warmup", type=int, default=NUTS["warmup"])
    ap.add_argument("--samples", type=int, default=NUTS["samples"])
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples")
    ap.add_argument("--plots", action="store_true", help="only: draw the figures again from the cache")
    ap.add_argument("--self-check", action="store_true", help="only: quick runs in a temporary folder, with checks")
    output_args(ap)
    args = ap.parse_args(argv)
    if args.self_check:
        self_check()
        return {}
    if args.plots:
        return {"plots": plots(args.out)}
    if args.standard == (args.suite is not None):
        ap.error("give --standard or --suite")
    if args.standard and (args.domain or args.limit):
        ap.error("--standard runs whole suites (STANDARD sets colpret's limit)")
    if args.limit is not None and args.limit < 1:
        ap.error("--limit must be >= 1")
    command = command_line("extrapolation", argv)
    if args.standard:
        jobs = [(suite, limit, methods) for suite, (limit, methods) in STANDARD.items()]
    else:
        jobs = [(args.suite, args.limit, methods_for(args.suite) if args.method == "all" else [args.method])]
    written = {}
    for suite, limit, methods in jobs:
        tasks = load_suite(suite, args.domain, limit)
        for method in methods:
            res = run_and_save(suite, method, tasks, limit, args, command)
            if res is not None:
                written[(suite, method)] = res
    if args.standard:
        plots(args.out)
        publish(tables, args)
    return written


def self_check() -> None:
    """Scores, stacking and suites on hand-checkable cases, then quick runs of every method kind in a temporary
    folder: the result files, their tables and a one-family ``bma`` equal to that family."""
    task = load_suite("revisiting", domain="BB", limit=1)[0]
    y = task.tgt["y"].to_numpy()
    row = score(task, np.tile(y, (50, 1)), np.zeros_like(y))
    assert row["rmsle"] == 0 and all(v == 1 for v in row["coverage"].values()) and np.isclose(row["crps"], 0)
    good = np.random.default_rng(1).normal(1.0, 0.1, 40)
    w = stacking_weights(np.stack([good - 3.0, good], axis=1))
    assert w[1] > 0.99 and np.isclose(w.sum(), 1) and stacking_weights(good[:, None]).tolist() == [1.0]
    col = load_suite("colpret", limit=2)
    assert len(col) == 2 and all(t.tgt["x"].min() > t.ctx["x"].max() and t.nsl_c == t.ctx["y"].max() for t in col)
    try:
        load_suite("revisiting", domain="XX")
        raise AssertionError("an unknown domain should stop the run")
    except SystemExit as exc:
        assert "no domain" in str(exc)
    tiny = ["--chains", "2", "--warmup", "60", "--samples", "60", "--boot", "12"]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        for suite, method, more in (*(("revisiting", m, ["--domain", "BB", "--limit", "2"])
                                      for m in ("nuts:M2", "bma", "ls:M2", "boot:M2")),
                                    ("colpret", "ls:M4", ["--limit", "2"]), ("chinchilla", "ls:chinchilla", []),
                                    ("gadre", "boot:downstream", ["--limit", "2"])):
            main(["--suite", suite, "--method", method, *more, *tiny, "--out", d])
            r = json.loads((out / result_name(suite, method)).read_text())
            assert r["command"] and r["wall_s"] > 0 and {"bayescale", "cpu_count"} <= set(r["machine"])
            assert r["aggregate"]["pooled"]["curves"] == len([c for c in r["curves"] if "failed" not in c]) >= 1
            for c in r["curves"]:
                cov = [c["coverage"][str(lv)] for lv in LEVELS]
                assert all(0 <= v <= 1 for v in cov) and cov == sorted(cov) and np.isfinite(c["ll"]), c
        bma, nuts = (json.loads((out / result_name("revisiting", m)).read_text())["curves"] for m in ("bma", "nuts:M2"))
        assert all(c["weights"] == {"M2": 1.0} for c in bma)  # one cached family: weight 1, its exact density
        assert np.allclose([c["ll"] for c in bma], [c["ll"] for c in nuts])
        main_table, goals, details = tables(out)
        text = "\n".join("| " + " | ".join(map(str, r)) + " |" for r in main_table.rows)
        assert "| revisiting | BB | nuts:M2 |" in text and "| chinchilla | Chinchilla | ls:chinchilla |" in text
        assert main_table.history and goals.rows and any(r[1] == "bma" for r in details.rows)
    print("benchmarks.extrapolation: self-check passed")


if __name__ == "__main__":
    main()
