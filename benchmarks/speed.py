"""Speed benchmark: bayescale NUTS against least-squares + bootstrap and emcee, and fit_many against separate fits.

    python -m benchmarks.speed [--quick] [--curves N] [--out DIR] [--md PATH]
    python -m benchmarks.speed --self-check   # the quick settings in a temporary folder, with checks

Writes ``DIR/speed.json`` and the ``speed`` table of ``benchmarks/RESULTS.md`` (``--quick``: ``speed_quick.json``
and no table).

1. One Chinchilla fit (222 runs with C < 1e21): first call (compile + sampling) and a second call with another
   seed (sampling only; the compiled program is reused), ESS/s, r-hat, divergences.
2. ``scipy.optimize.least_squares`` in log space (multi-start) plus a nonparametric bootstrap, timed whole.
3. ``emcee`` on the same log posterior (NumPyro's potential energy of bayescale's model, unconstrained space).
4. ``fit_many`` on the 72 image-classification curves of the revisiting benchmark against separate ``fit`` calls.

The persistent JAX compilation cache is switched off (``BAYESCALE_JAX_CACHE=off``) so compile time is visible.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # before bayescale is imported: compile times must not come from the disk cache
    os.environ["BAYESCALE_JAX_CACHE"] = "off"

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

import bayescale as bs
from bayescale import datasets
from bayescale.model import batch_pad_length, build_model, curve_data, pad_length
from benchmarks._common import (LEGACY_LIKELIHOOD, RESULTS, ROOT, Table, command_line, loadavg, machine_info,
                                output_args, publish, save_json, shown)

CUTOFF = 1e21


@dataclass(frozen=True)
class Config:
    """Benchmark sizes. ``FULL`` is the issue's setting, ``QUICK`` a smoke test."""

    chains: int = 4
    warmup: int = 1000
    samples: int = 1000
    n_boot: int = 1000
    ls_starts: int = 4
    emcee_walkers: int = 32
    emcee_steps: int = 20000
    emcee_burn: float = 0.2  # fraction of emcee steps discarded before computing ESS
    n_curves: int | None = None  # None: all 72 IC curves
    repeats: int = 5  # NUTS second calls and emcee runs, interleaved; ratios use the medians (noisy machine)
    separate_subset: int = 12  # time this many separate fits first; stop there if the rest would exceed the budget
    separate_budget_s: float = 1200.0
    many_timeout_s: float = 1200.0  # fit_many runs in a child process killed after this; then a lower bound
    warm_cache: bool = True  # also time a first call in a fresh process with a warm persistent cache
    sampler: dict = field(default_factory=dict)  # extra NUTS keywords (n_starts, opt_steps, ...)


FULL = Config()
QUICK = Config(chains=2, warmup=50, samples=50, n_boot=20, ls_starts=2, emcee_walkers=16, emcee_steps=300, repeats=2,
               n_curves=2, separate_subset=2, warm_cache=False, sampler={"n_starts": 4, "opt_steps": 50})


class Timer:
    """Wall-clock and process CPU seconds of a ``with`` block (CPU/wall shows contention on a shared machine)."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.s, self.cpu_s = time.perf_counter() - self.t0, time.process_time() - self.c0


def chinchilla_train():
    """The 222 Chinchilla runs with C < 1e21 FLOP."""
    runs = datasets.chinchilla()
    return runs[runs["C"] < CUTOFF].reset_index(drop=True)


def _fit_chinchilla(train, cfg: Config, seed: int):
    return bs.fit(train, "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", chains=cfg.chains, warmup=cfg.warmup,
                  samples=cfg.samples, seed=seed, progress=False, likelihood=LEGACY_LIKELIHOOD, **cfg.sampler)


def _diag(f) -> dict:
    d = f.diagnostics
    return {"min_ess_bulk": d["min_ess_bulk"], "min_ess_tail": d["min_ess_tail"], "max_rhat": d["max_rhat"],
            "divergences": d["divergences"], "mean_steps": d["mean_steps"], "ok": bool(f.ok)}


# ------------------------------------------------------------------------------------------------------------
# 1. NUTS


def bench_nuts(train, cfg: Config):
    """First call (compile + sampling) and second call (sampling only) of one Chinchilla fit; returns (dict, fit)."""
    with Timer() as t1:
        f1 = _fit_chinchilla(train, cfg, seed=0)
    with Timer() as t2:
        f2 = _fit_chinchilla(train, cfg, seed=1)
    d = _diag(f2)
    nat = f2.natural()
    out = {
        "runs": len(train), "chains": cfg.chains, "warmup": cfg.warmup, "samples": cfg.samples,
        "first_call_s": t1.s, "first_call_cpu_s": t1.cpu_s, "second_call_s": t2.s, "second_call_cpu_s": t2.cpu_s,
        "compile_s": t1.s - t2.s, "sampling_s": t2.s, **d,
        "ess_per_s": d["min_ess_bulk"] / t2.s,
        "ess_per_s_incl_compile": d["min_ess_bulk"] / t1.s,
        "first_call_diagnostics": _diag(f1),
        "posterior_mean": {k: float(nat[k].mean()) for k in nat.data_vars},
    }
    return out, f2


def _child(fn: str, cfg: Config, env: dict | None = None, timeout: float | None = None):
    """Run ``benchmarks.speed.<fn>(cfg)`` in a fresh Python process and return its JSON result.

    On timeout the child is killed and ``(None, partial stdout)`` is returned; otherwise ``(result, stdout)``.
    """
    code = (f"import json, sys\nfrom benchmarks.speed import Config, {fn}\n"
            f"print('RESULT ' + json.dumps({fn}(Config(**json.loads(sys.argv[1])))), flush=True)")
    cmd = [sys.executable, "-c", code, json.dumps(asdict(cfg))]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    try:
        res = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        return None, out.decode() if isinstance(out, bytes) else out
    if res.returncode:
        raise RuntimeError(f"benchmark child {fn} failed:\n{res.stderr[-4000:]}")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), res.stdout


def first_call_s(cfg: Config) -> float:
    """Seconds of the first Chinchilla fit in this process (imports and data loading not timed)."""
    train = chinchilla_train()
    with Timer() as t:
        _fit_chinchilla(train, cfg, seed=0)
    return t.s


def bench_warm_cache(cfg: Config) -> dict:
    """First-call time in a fresh process whose persistent compilation cache another process has just filled."""
    with tempfile.TemporaryDirectory() as cache:
        cold = _child("first_call_s", cfg, {"BAYESCALE_JAX_CACHE": cache})[0]
        warm = _child("first_call_s", cfg, {"BAYESCALE_JAX_CACHE": cache})[0]
    return {"cold_cache_first_call_s": cold, "warm_cache_first_call_s": warm,
            "note": "each in a fresh Python process (imports not timed); the second reads the first's disk cache"}


# ------------------------------------------------------------------------------------------------------------
# 2. Least squares + bootstrap


def _ls_problem(train):
    lnN, lnD = np.log(train["N"].to_numpy(float)), np.log(train["D"].to_numpy(float))
    return lnN, lnD, train["loss"].to_numpy(float), (lnN.mean(), lnD.mean())


def ls_fit(lnN, lnD, y, center, starts: int):
    """Chinchilla law by ``least_squares`` on log residuals, best of ``starts`` starts.

    Parameters (E, a, alpha, b, beta) with A/N^alpha = exp(a - alpha (ln N - c_N)) (centred, well conditioned).
    Returns (params, cost).
    """
    from scipy.optimize import least_squares

    tn, td, logy = lnN - center[0], lnD - center[1], np.log(y)
    ymin, ymed = y.min(), np.median(y)

    def parts(p):
        e, a, al, b, be = p
        pn, pd = np.exp(a - al * tn), np.exp(b - be * td)
        return pn, pd, e + pn + pd

    def resid(p):
        return np.log(parts(p)[2]) - logy

    def jac(p):
        pn, pd, m = parts(p)
        return np.column_stack([1 / m, pn / m, -tn * pn / m, pd / m, -td * pd / m])

    lb, ub = [0.0, -20.0, 0.0, -20.0, 0.0], [ymin, 20.0, 3.0, 20.0, 3.0]
    grid = [(ef, ex) for ef in (0.5, 0.9) for ex in (0.3, 0.6, 0.15, 1.0)]
    best = None
    for ef, ex in grid[:starts]:
        e0 = ef * ymin
        x0 = [e0, np.log(0.5 * (ymed - e0)), ex, np.log(0.5 * (ymed - e0)), ex]
        try:
            r = least_squares(resid, x0, jac=jac, bounds=(lb, ub), method="trf")
        except (ValueError, FloatingPointError):
            continue
        if best is None or r.cost < best.cost:
            best = r
    if best is None:
        return np.full(5, np.nan), np.inf
    return best.x, float(best.cost)


def _ls_natural(x, center) -> dict:
    e, a, al, b, be = x
    return {"E": e, "A": math.exp(a + al * center[0]), "alpha": al, "B": math.exp(b + be * center[1]), "beta": be}


def bench_bootstrap(train, cfg: Config, seed: int = 0) -> dict:
    """One least-squares fit, then ``n_boot`` refits on runs resampled with replacement, timed whole."""
    lnN, lnD, y, center = _ls_problem(train)
    with Timer() as t0:
        x, cost = ls_fit(lnN, lnD, y, center, cfg.ls_starts)
    rng = np.random.default_rng(seed)
    params = np.full((cfg.n_boot, 5), np.nan)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), Timer() as tb:
        for i in range(cfg.n_boot):
            idx = rng.integers(0, len(y), len(y))
            params[i] = ls_fit(lnN[idx], lnD[idx], y[idx], center, cfg.ls_starts)[0]
    ok = np.all(np.isfinite(params), axis=1)
    nat = [_ls_natural(p, center) for p in params[ok]]
    boot = {k: [d[k] for d in nat] for k in ("E", "A", "alpha", "B", "beta")}
    return {
        "n_boot": cfg.n_boot, "starts": cfg.ls_starts, "single_fit_s": t0.s, "bootstrap_s": tb.s,
        "bootstrap_cpu_s": tb.cpu_s, "failed_refits": int((~ok).sum()), "point_estimate": _ls_natural(x, center),
        "bootstrap_q05": {k: float(np.quantile(v, 0.05)) for k, v in boot.items()},
        "bootstrap_q95": {k: float(np.quantile(v, 0.95)) for k, v in boot.items()},
    }


# ------------------------------------------------------------------------------------------------------------
# 3. emcee on bayescale's posterior


def log_posterior(train):
    """bayescale's Chinchilla log posterior in the unconstrained space: (jitted batch logp(flat), model, data, unravel)."""
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import potential_energy

    from bayescale.runs import prepare_runs

    rd = prepare_runs(train, "chinchilla", y="loss", inputs={"N": "N", "D": "D"})
    frame = rd.curve(None).reset_index(drop=True)
    data, _ = curve_data(rd.law, frame, len(frame))  # no padding: padded points are masked out anyway
    model = build_model(rd.law, LEGACY_LIKELIHOOD)
    names = [*rd.law.param_names, "sigma"]
    _, unravel = ravel_pytree({k: jnp.zeros(()) for k in names})

    def logp(flat):
        v = -potential_energy(model, (data,), {}, unravel(flat))
        return jnp.where(jnp.isfinite(v), v, -jnp.inf)

    return jax.jit(jax.vmap(logp)), model, data, unravel, names


def bench_emcee(train, nuts_fit, nuts: dict, cfg: Config, seed: int = 0) -> dict:
    """emcee's EnsembleSampler on the same target, started in a small ball at the NUTS posterior mean."""
    import emcee
    import jax
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import constrain_fn, unconstrain_fn

    logp, model, data, unravel, names = log_posterior(train)
    draws = nuts_fit.draws()
    z = jax.vmap(lambda p: unconstrain_fn(model, (data,), {}, p))({k: draws[k] for k in names})
    flat = np.asarray(jax.vmap(lambda d: ravel_pytree(d)[0])(z))
    pos = unravel(np.arange(flat.shape[1], dtype=float))  # name -> column of the flat vector
    names = sorted(names, key=lambda k: int(pos[k]))
    # the target is NUTS's: logp at its draws equals minus the potential energy NUTS recorded
    lp_nuts = nuts_fit.idata["sample_stats"]["lp"].values.reshape(-1)
    lp_diff = float(np.max(np.abs(np.asarray(logp(flat)) - lp_nuts)))

    rng = np.random.default_rng(seed)
    ndim, nw = flat.shape[1], cfg.emcee_walkers
    p0 = flat.mean(0) + 1e-3 * rng.standard_normal((nw, ndim))
    with Timer() as tc:  # compile both batch shapes emcee uses (all walkers, half of them)
        for n in (nw, nw // 2):
            logp(p0[:n]).block_until_ready()

    def lp_fn(x):
        return np.asarray(logp(x))

    sampler = emcee.EnsembleSampler(nw, ndim, lp_fn, vectorize=True)
    sampler.random_state = np.random.RandomState(seed).get_state()
    with Timer() as ts:
        sampler.run_mcmc(p0, cfg.emcee_steps, progress=False)
    burn = int(cfg.emcee_burn * cfg.emcee_steps)
    chain = sampler.get_chain(discard=burn)  # (steps, walkers, ndim)
    ess = [float(bs_ess(chain[:, :, j].T)) for j in range(ndim)]
    tau = sampler.get_autocorr_time(discard=burn, tol=0)
    ess_ac = chain.shape[0] * nw / tau
    thin = chain[:: max(1, chain.shape[0] // 500)].reshape(-1, ndim)
    cons = jax.vmap(lambda f: constrain_fn(model, (data,), {}, unravel(f)))(thin)
    nat = nuts_fit.law.natural_params({k: np.asarray(cons[k]) for k in nuts_fit.law.param_names}, nuts_fit.scales)
    out = {
        "walkers": nw, "steps": cfg.emcee_steps, "burn_in": burn, "logp_compile_s": tc.s,
        "sampling_s": ts.s, "sampling_cpu_s": ts.cpu_s, "acceptance": float(np.mean(sampler.acceptance_fraction)),
        "ess_bulk": dict(zip(names, ess)), "min_ess_bulk": min(ess),
        "ess_autocorr": dict(zip(names, map(float, ess_ac))), "min_ess_autocorr": float(np.min(ess_ac)),
        "ess_per_s": min(ess) / ts.s,
        "logp_vs_nuts_lp_max_abs_diff": lp_diff,
        "posterior_mean": {k: float(np.mean(v)) for k, v in nat.items()},
    }
    out["nuts_over_emcee_ess_per_s"] = nuts["ess_per_s"] / out["ess_per_s"]
    out["nuts_incl_compile_over_emcee_ess_per_s"] = nuts["ess_per_s_incl_compile"] / out["ess_per_s"]
    out["emcee_s_for_nuts_ess"] = nuts["min_ess_bulk"] / out["ess_per_s"]
    return out


def bs_ess(x) -> float:
    """Bulk ESS (ArviZ, rank-normalised split chains) of an array (chain, draw)."""
    import arviz as az

    return float(az.ess(np.asarray(x), method="bulk"))


# ------------------------------------------------------------------------------------------------------------
# 4. fit_many against separate fits


def ic_curves(n: int | None = None):
    """Fit split of the image-classification curves of the revisiting benchmark (first ``n`` curves)."""
    r = datasets.revisiting()
    ic = r[(r.domain == "IC") & r.train]
    curves = list(ic["curve"].unique())
    if n is not None:
        curves = curves[:n]
        ic = ic[ic["curve"].isin(curves)]
    return ic.reset_index(drop=True), curves


def fit_many_timed(cfg: Config) -> dict:
    """One ``fit_many`` over the IC curves in this process (compile included); prints its start time first."""
    from bayescale.config import usable_cores

    ic, _ = ic_curves(cfg.n_curves)
    print(f"START {time.time()}", flush=True)
    with Timer() as tm:
        fm = bs.fit_many(ic, "M4", group="curve", x="x", y="y", chains=cfg.chains, warmup=cfg.warmup,
                         samples=cfg.samples, progress=False, refit_flagged=False, likelihood=LEGACY_LIKELIHOOD,
                         **cfg.sampler)
    steps = np.stack([f.idata["sample_stats"]["n_steps"].values for f in fm.values()])  # (curve, chain, draw)
    n_pad = batch_pad_length(int(ic.groupby("curve").size().max()))
    us = grad_cost_us(ic[ic["curve"] == ic["curve"].iloc[0]], n_pad)
    n_grads, floor = arithmetic_floor(float(steps.mean(axis=2).sum()), cfg, us)
    return {
        "grad_us": us, "pad": n_pad, "leapfrog_steps_total": n_grads, "cores": usable_cores(),
        "arithmetic_floor_s": floor,
        "fit_many_s": tm.s, "fit_many_cpu_s": tm.cpu_s, "fit_many_ok": int(sum(f.ok for f in fm.values())),
        "fit_many_mean_steps": float(steps.mean()),
    }


def arithmetic_floor(chain_mean_steps: float, cfg: Config, grad_us: float) -> tuple[float, float]:
    """(gradients, seconds) for chains whose mean leapfrog steps per draw sum to ``chain_mean_steps``, every core busy.

    Every leapfrog step of every chain needs one gradient; warm-up steps are not recorded, so they are counted at
    the sampling phase's mean (warm-up trajectories are usually longer: this is a lower bound).
    """
    from bayescale.config import usable_cores

    n_grads = chain_mean_steps * (cfg.warmup + cfg.samples)
    return n_grads, n_grads * grad_us * 1e-6 / usable_cores()


def grad_cost_us(frame, n_pad: int, reps: int = 4000) -> float:
    """Microseconds per gradient of M4's log posterior on one curve padded to ``n_pad`` (one lane, in a scan)."""
    import jax
    from numpyro.infer.util import potential_energy

    from bayescale.runs import prepare_runs
    from bayescale.sampler import prior_draw

    rd = prepare_runs(frame, "M4", x="x", y="y")
    data = jax.tree.map(jax.numpy.asarray, curve_data(rd.law, rd.frame.reset_index(drop=True), n_pad)[0])
    model = build_model(rd.law, LEGACY_LIKELIHOOD)
    grad = jax.grad(lambda z: potential_energy(model, (data,), {}, z))

    def body(z, _):  # a tiny move keeps XLA from hoisting the gradient out of the loop
        return jax.tree.map(lambda a, g: a - 1e-12 * g, z, grad(z)), None

    loop = jax.jit(lambda z: jax.lax.scan(body, z, None, length=reps)[0])
    z = prior_draw(model, jax.random.PRNGKey(0), data)
    jax.block_until_ready(loop(z))
    with Timer() as t:
        jax.block_until_ready(loop(z))
    return t.s / reps * 1e6


def bench_many(cfg: Config, seed: int = 0) -> dict:
    """``fit_many`` over all curves against one ``fit`` per curve (a random subset, extrapolated, if too slow).

    ``fit_many`` runs in a child process killed after ``many_timeout_s``; then its time is a lower bound.
    """
    many, stdout = _child("fit_many_timed", cfg, timeout=cfg.many_timeout_s)
    if many is None:
        t0 = [float(ln.split()[1]) for ln in stdout.splitlines() if ln.startswith("START ")]
        lower = time.time() - t0[0] if t0 else cfg.many_timeout_s
        many = {"fit_many_s": None, "fit_many_lower_bound_s": lower, "fit_many_ok": None}
    many["fit_many_timed_out"] = many["fit_many_s"] is None

    ic, curves = ic_curves(cfg.n_curves)
    kw = dict(x="x", y="y", chains=cfg.chains, warmup=cfg.warmup, samples=cfg.samples, progress=False,
              likelihood=LEGACY_LIKELIHOOD, **cfg.sampler)
    order = list(np.random.default_rng(seed).permutation(len(curves)))
    per_fit, elapsed = [], 0.0
    for k, i in enumerate(order):
        sub = ic[ic["curve"] == curves[i]]
        with Timer() as t:
            f = bs.fit(sub, "M4", **kw)
        elapsed += t.s
        per_fit.append({"curve": curves[i], "runs": len(sub), "pad": pad_length(len(sub)), "s": t.s,
                        "ok": bool(f.ok), "mean_steps": f.diagnostics["mean_steps"]})
        if k + 1 == cfg.separate_subset and elapsed / (k + 1) * len(curves) > cfg.separate_budget_s:
            break
    n_done, n_all = len(per_fit), len(curves)
    linear = elapsed / n_done * n_all
    # compile-aware: the first fit per padded length compiled; each curve not timed costs a typical later fit
    seen, warm = set(), []
    for p in per_fit:
        if p["pad"] in seen:
            warm.append(p["s"])
        seen.add(p["pad"])
    aware = elapsed + (n_all - n_done) * (float(np.median(warm)) if warm else elapsed / n_done)
    ok_sep = sum(p["ok"] for p in per_fit)
    t_many = many["fit_many_s"] or many["fit_many_lower_bound_s"]
    return {
        "law": "M4", "curves": n_all, "chains": cfg.chains, "warmup": cfg.warmup, "samples": cfg.samples, **many,
        "separate_timed": n_done, "separate_extrapolated": n_done < n_all,
        "separate_timed_s": elapsed, "separate_total_s": linear, "separate_total_s_compile_aware": aware,
        "separate_ok": int(ok_sep), "separate_ok_fraction": ok_sep / n_done,
        "speedup": linear / t_many, "speedup_compile_aware": aware / t_many,
        # the same floor for the separate fits (their own step counts; compile excluded)
        "separate_arithmetic_floor_s": (arithmetic_floor(sum(p["mean_steps"] for p in per_fit) * cfg.chains, cfg,
                                                         many["grad_us"])[1] * n_all / n_done)
                                       if many.get("grad_us") else None,
        "speedup_is_upper_bound": many["fit_many_timed_out"],
        "note": ("fit_many was stopped at many_timeout_s: its time is a lower bound, the speed-up an upper bound"
                 if many["fit_many_timed_out"] else ""),
        "separate_fits": per_fit,
    }


# ------------------------------------------------------------------------------------------------------------
# Driver and report


def run(cfg: Config, command: str = "") -> dict:
    """All four measurements (fit_many and the warm-cache check in child processes); returns the results."""
    res = {"config": asdict(cfg), "machine": machine_info(command)}
    train = chinchilla_train()
    res["nuts"], nuts_fit = bench_nuts(train, cfg)
    res["bootstrap"] = bench_bootstrap(train, cfg)
    b, n = res["bootstrap"]["bootstrap_s"], res["nuts"]
    res["nuts_vs_bootstrap"] = {"first_call_over_bootstrap": n["first_call_s"] / b,
                                "sampling_over_bootstrap": n["sampling_s"] / b, "goal": "<= 0.5"}
    res["emcee"] = bench_emcee(train, nuts_fit, n, cfg)
    # more NUTS second calls and emcee runs, interleaved so that a change in the machine's load hits both
    nuts_rates, emcee_rates, emcee_s = [n["ess_per_s"]], [res["emcee"]["ess_per_s"]], [res["emcee"]["sampling_s"]]
    for r in range(1, cfg.repeats):
        with Timer() as t:
            f = _fit_chinchilla(train, cfg, seed=1 + r)
        nuts_rates.append(f.diagnostics["min_ess_bulk"] / t.s)
        e = bench_emcee(train, nuts_fit, n, cfg, seed=r)
        emcee_rates.append(e["ess_per_s"])
        emcee_s.append(e["sampling_s"])
    res["repeats"] = {
        "n": cfg.repeats, "nuts_ess_per_s": nuts_rates, "emcee_ess_per_s": emcee_rates, "emcee_s": emcee_s,
        "pair_ratios": [a / b for a, b in zip(nuts_rates, emcee_rates)],
        "median_ratio": float(np.median(nuts_rates) / np.median(emcee_rates)),
    }
    res["fit_many"] = bench_many(cfg)
    if cfg.warm_cache:
        res["nuts"]["warm_cache"] = bench_warm_cache(cfg)
    res["machine"]["loadavg_end"] = loadavg()
    return res


def _f(v, fmt=".4g"):
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def rows(res: dict) -> list[list[str]]:
    """Measure / value rows of the speed table."""
    n, b, e, fm = res["nuts"], res["bootstrap"], res["emcee"], res["fit_many"]
    nb = res["nuts_vs_bootstrap"]
    if fm["fit_many_timed_out"]:
        many, bound = f"did not finish: stopped after {_f(fm['fit_many_lower_bound_s'], '.0f')} s", "< "
    else:
        many, bound = (f"{_f(fm['fit_many_s'])} s, {fm['fit_many_ok']} ok ({_f(fm['fit_many_mean_steps'])} "
                       "leapfrog steps per draw)"), ""
    sep = (f"{fm['separate_timed']} of {fm['curves']} timed, extrapolated linearly" if fm["separate_extrapolated"]
           else f"all {fm['curves']}")
    out = [
        ("Chinchilla NUTS, first call (compile + sampling)", f"{_f(n['first_call_s'])} s"),
        ("Chinchilla NUTS, second call (sampling)", f"{_f(n['sampling_s'])} s"),
        ("Compile (first − second)", f"{_f(n['compile_s'])} s"),
        ("NUTS min bulk ESS / ESS per s", f"{_f(n['min_ess_bulk'], '.0f')} / {_f(n['ess_per_s'], '.0f')}"),
        ("NUTS max r-hat / divergences", f"{_f(n['max_rhat'], '.4f')} / {n['divergences']}"),
    ]
    if "warm_cache" in n:
        out.append(("First call, fresh process, warm disk cache",
                    f"{_f(n['warm_cache']['warm_cache_first_call_s'])} s"))
    out += [
        (f"least_squares + {b['n_boot']}-resample bootstrap ({b['starts']} starts)", f"{_f(b['bootstrap_s'])} s"),
        ("NUTS first call / bootstrap (goal ≤ 0.5)", _f(nb["first_call_over_bootstrap"])),
        ("NUTS sampling / bootstrap (goal ≤ 0.5)", _f(nb["sampling_over_bootstrap"])),
        *([("NUTS first call in a fresh process with a warm disk cache / bootstrap",
            _f(n["warm_cache"]["warm_cache_first_call_s"] / b["bootstrap_s"]))] if "warm_cache" in n else []),
        (f"emcee {e['walkers']} walkers x {e['steps']} steps", f"{_f(e['sampling_s'])} s, min bulk ESS "
                                                               f"{_f(e['min_ess_bulk'], '.0f')}"),
        ("emcee ESS per s", _f(e["ess_per_s"], ".0f")),
        ("NUTS / emcee ESS per s (goal ≥ 20)", _f(e["nuts_over_emcee_ess_per_s"])),
    ]
    if res.get("repeats"):
        rp = res["repeats"]
        out.append((f"NUTS / emcee ESS per s, medians of {rp['n']} interleaved runs each (per-pair range)",
                    f"{_f(rp['median_ratio'])} ({_f(min(rp['pair_ratios']), '.3g')}-"
                    f"{_f(max(rp['pair_ratios']), '.3g')};"
                    f" emcee {_f(min(rp['emcee_s']), '.3g')}-{_f(max(rp['emcee_s']), '.3g')} s)"))
    out += [
        ("NUTS incl. compile / emcee ESS per s", _f(e["nuts_incl_compile_over_emcee_ess_per_s"])),
        (f"fit_many, {fm['curves']} IC curves (M4)", many),
        (f"separate fits ({sep})", f"{_f(fm['separate_total_s'])} s, {fm['separate_ok']}/{fm['separate_timed']} ok"),
        ("fit_many speed-up (goal ≥ 10)", f"{bound}{_f(fm['speedup'])}x (compile-aware estimate of the separate "
                                          f"fits: {bound}{_f(fm['speedup_compile_aware'])}x)"),
    ]
    if fm.get("arithmetic_floor_s"):
        out += [
            ("M4 log-posterior gradient, one curve padded to " f"{fm['pad']} runs", f"{_f(fm['grad_us'], '.3g')} µs"),
            (f"Arithmetic floor of fit_many ({_f(fm['leapfrog_steps_total'], '.3g')} leapfrog steps x gradient "
             f"/ {fm['cores']} cores; no compile, no NUTS bookkeeping)", f"{_f(fm['arithmetic_floor_s'])} s"),
            ("Same floor for the separate fits (their step counts)", f"{_f(fm.get('separate_arithmetic_floor_s'))} s"),
        ]
    return [list(r) for r in out]


def tables(out: Path = RESULTS, name: str = "speed.json") -> list[Table]:
    res = json.loads((out / name).read_text()) if (out / name).exists() else None
    if res is None:
        return []
    m, cfg = res["machine"], res["config"]
    source = (f"{m['cpu_model']} ({m['cpus_usable']} cores, shared; load average {m['loadavg_start']} at start, "
              f"{m.get('loadavg_end')} at end), JAX {m['versions']['jax']} on {m['jax_backend']}, NumPyro "
              f"{m['versions']['numpyro']}, bayescale {m['versions']['bayescale']}"
              + (f" (commit {m['git_commit'][:7]}{', modified' if m['bayescale_uncommitted_changes'] else ''})"
                 if m.get("git_commit") else "")
              + f", {m['date']}; NUTS {cfg['chains']} chains x ({cfg['warmup']} warm-up + {cfg['samples']} draws), "
              f"persistent compilation cache off; {shown(out / name)}")
    history = ""
    ru = res["fit_many"].get("reused_from")
    if ru:  # written by the --reuse-many mode this script no longer has
        history = (f"`{m['command']}`, which kept the fit_many rows of the run of {ru['date']} (`{ru['command']}`, "
                   f"commit {(ru.get('git_commit') or '?')[:7]}{', modified' if ru.get('modified') else ''})")
    return [Table("speed", "python -m benchmarks.speed" if ru else m["command"], source, ["Measure", "Value"],
                  rows(res), history)]


def self_check() -> None:
    """The quick settings end to end in a temporary folder: every key present, the numbers finite, emcee sampling
    exactly the posterior NUTS sampled, the table rendered; and a child past its time limit gives None."""
    with tempfile.TemporaryDirectory() as d:
        res = run(QUICK, "self-check")
        save_json(Path(d) / "speed.json", res)
        res = json.loads((Path(d) / "speed.json").read_text())
        assert {"config", "machine", "nuts", "bootstrap", "nuts_vs_bootstrap", "emcee", "fit_many"} <= res.keys()
        assert res["nuts"]["runs"] == 222 and res["bootstrap"]["failed_refits"] < QUICK.n_boot
        for part, keys in (("nuts", ("first_call_s", "sampling_s", "min_ess_bulk", "ess_per_s", "max_rhat")),
                           ("emcee", ("sampling_s", "min_ess_bulk", "ess_per_s", "nuts_over_emcee_ess_per_s")),
                           ("fit_many", ("fit_many_s", "separate_total_s", "speedup", "speedup_compile_aware"))):
            assert all(math.isfinite(res[part][k]) for k in keys), (part, res[part])
        assert res["emcee"]["logp_vs_nuts_lp_max_abs_diff"] < 1e-6
        assert set(res["emcee"]["ess_bulk"]) == {"E", "a", "alpha", "b", "beta", "sigma"}
        m = res["fit_many"]
        assert m["curves"] == QUICK.n_curves == m["separate_timed"] and not m["separate_extrapolated"]
        (t,) = tables(Path(d))
        assert len(t.rows) >= 15 and all(len(r) == 2 for r in t.rows)
    out, stdout = _child("fit_many_timed", QUICK, timeout=2)
    assert out is None and isinstance(stdout, str)
    print("benchmarks.speed: self-check passed")


def main(argv=None) -> dict | None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.speed", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (speed_quick.json)")
    ap.add_argument("--self-check", action="store_true", help="the quick settings in a temporary folder, with checks")
    ap.add_argument("--many-timeout", type=float, default=None, help="seconds before fit_many is stopped "
                                                                       f"(default {FULL.many_timeout_s:.0f})")
    ap.add_argument("--curves", type=int, default=None,
                    help="IC curves for fit_many vs separate fits (default: all 72)")
    output_args(ap)
    args = ap.parse_args(argv)
    if args.self_check:
        self_check()
        return None
    cfg = QUICK if args.quick else FULL
    if args.curves is not None:
        cfg = replace(cfg, n_curves=args.curves)
    if args.many_timeout is not None:
        cfg = replace(cfg, many_timeout_s=args.many_timeout)
    res = run(cfg, command_line("speed", argv))
    name = "speed_quick.json" if args.quick else "speed.json"
    save_json(args.out / name, res)
    print(f"wrote {args.out / name}")
    if not args.quick:
        publish(tables, args)
    return res


if __name__ == "__main__":
    main()
