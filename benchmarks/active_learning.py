"""Replay of run selection on real scaling data: does choosing runs by expected variance reduction per unit cost
reach a target accuracy with less compute than the usual choices?

Protocol (per suite): start from the cheapest runs of a real pool, acquire runs from the pool one at a time, refit
with NUTS after each acquisition, and track the target's error (RMSLE of the posterior predictive median at the
held-out target runs) and mean log predictive density against the compute spent (sum of the costs of every run
fitted so far). Strategies:

- ``ours``: :func:`bayescale.next_runs` (k=1; expected reduction of the target's posterior variance per unit cost,
  importance-reweighted fantasies), target = the held-out runs;
- ``ours_goal``: the same, told the accuracy to reach (the strict threshold below, as a posterior sd after the
  fit's noise): each pick is the cheapest run expected to get there, else the best per unit cost
  (``next_runs(target_sd=...)``);
- ``ours_cool``: the score divides by cost**p with p falling from 1 to 0 over the protocol's acquisitions
  (``next_runs(cost_power=p)``);
- ``ours_plan``: ``next_runs(horizon=...)`` with the horizon = the compute spent so far (plans compared, a big run
  against many small ones, each plan at most doubling the spend);
- ``ours_cal``: ``ours`` on the fit with its extrapolation error calibrated by leave-future-out on the runs bought
  so far; ``ours_tau``: the same with the domain's tau from leave-future-out on the whole pool (fit split);
- ``ours_local``: ``ours`` on a local fit (``Fit.localize``): each run carries an extra error tau x its distance in
  decades from the targets (tau: the domain's, as for ``ours_tau``), and so does each candidate in ``next_runs``.
  Each baseline's rule is replayed with the same local fit too (``grid+local``, ...) and counts as a baseline, so
  that what the local fit gains by itself is not credited to the choice of runs;
- ``random`` (several seeds), ``cheapest`` (cheapest first), ``grid`` (the pool run nearest to each point of a
  log-uniform grid of cost between the start and the largest pool run, ascending), ``uncertain`` (the pool run whose
  outcome is most uncertain: largest predictive sd of log y; NSL-PFN's acquisition).

Suites (``STRATEGIES`` says which strategies each replays):

- ``chinchilla``: Epoch AI's Chinchilla runs; pool = runs below 1e21 FLOP, start = the 8 cheapest, acquire 12
  (20 runs at the end), target = the 23 runs at or above 1e21 FLOP; law ``chinchilla``; cost 6ND. Then
  ``--feasibility`` random designs of the same pool: how reachable the threshold is at half the compute by any
  choice of runs.
- ``starts``/``starts_dn1``: the same real replay from ``--starts`` start sets (8 of the 20 cheapest), pooled;
  dn1 restricts the pool to D/N >= 1.
- ``sim``: the Chinchilla design with losses simulated from Hoffmann et al.'s law (1% noise), in ``--worlds`` noise
  draws; the error is against the noise-free law and pooled over the worlds (the law is right by construction: this
  is where the acquisition is tuned and where its efficiency can be seen apart from misspecification).
- ``ic``: ``--curves`` curves of the revisiting benchmark's IC domain with NSL-PFN's protocol: pool = the fit
  split, start = the 4 smallest x, acquire 5 (9 at the end), target = the held-out split (largest x); law ``M2``;
  cost x.

Goals. Issue 16's (the real replays): ``ours`` ends at least as accurate as the log-uniform grid for no more compute
(the tables' error and log density at the grid's final compute), and the uncertainty it reports matches the error it
makes (mean z^2 of the simulated worlds' true curve near 1). The earlier goal, kept in the tables' last columns and
the ``*_levels`` tables: the accuracy the best baseline has after the protocol's acquisitions (its RMSLE then: the
threshold) reached by ``ours`` with at most half the compute that the best baseline needs to first reach it. A
fixed number of runs would favour strategies that buy expensive runs, so every strategy that has not reached the
threshold keeps acquiring (up to a cap: 60 runs for Chinchilla, 120 in the simulated worlds, 12 for IC) while its
compute is still below the best baseline's compute-to-reach (in the many-world suites: the most any baseline spent
in that world).

    python -m benchmarks.active_learning   # every suite: benchmarks/results/active_learning.json, .png, the tables
    python -m benchmarks.active_learning --likelihood logstudentt   # ..._logstudentt.json, tables replay_*_logstudentt
    python -m benchmarks.active_learning --suites ic --curves 1 --strategies random,ours --draws 50 --out /tmp/al

A run of some suites keeps the other suites' results in the same file (same ``--draws``); each suite's tables
name the command that made it.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._common import (BASELINES, HOFFMANN, LEGACY_LIKELIHOOD, NOISE_MODELS, OURS, RESULTS, Table,
                                chinchilla_setup, command_line, compute_to_reach, fit_short, held, is_local,
                                levels_table, load_json, machine_line, now, output_args, pool_tau, pooled_summary,
                                publish, save_json, score_fit, shown, simulated_chinchilla, starts_setup, suffix)

LOCAL = tuple(f"{b}+local" for b in BASELINES)
LIKELIHOOD = LEGACY_LIKELIHOOD  # every refit's noise model (--likelihood; the published tables: lognormal)
STRATEGIES = {
    "chinchilla": (*BASELINES, *LOCAL, "ours", "ours_goal", "ours_cool", "ours_plan", "ours_cal", "ours_tau",
                   "ours_local"),
    "starts": (*BASELINES, *LOCAL, "ours", "ours_local"),
    "starts_dn1": (*BASELINES, *LOCAL, "ours", "ours_local"),
    "sim": (*BASELINES, "ours", "ours_plan", "ours_local"),
    "ic": (*BASELINES, *LOCAL, "ours", "ours_goal", "ours_cool", "ours_plan", "ours_cal", "ours_local"),
}
FILE = "active_learning.json"  # lognormal refits, as the published tables; another noise model: a file of its own


def _file(likelihood: str, ext: str = "json") -> str:
    """The result file of a replay with ``likelihood`` refits (its tables' names carry the noise model too)."""
    return f"{FILE.removesuffix('.json')}{suffix(likelihood)}.{ext}"


def _pick(strategy: str, fit, pool: pd.DataFrame, avail: list, target_q: pd.DataFrame, inputs: list, rng, step: int,
          grid: np.ndarray, seed: int, goal_rmsle: float | None = None, n_acquire: int = 12) -> int:
    import bayescale as bs
    from bayescale.decisions import SearchOptions

    cand = pool.loc[avail]
    strategy = strategy.removesuffix("+local")   # the baseline's rule; its fit is local (Replay)
    if strategy == "random":
        return int(rng.choice(avail))
    if strategy == "cheapest":
        return int(cand["cost"].idxmin())
    if strategy == "grid":
        g = np.log(grid[min(step, len(grid) - 1)])
        return int((np.log(cand["cost"]) - g).abs().idxmin())
    if strategy == "uncertain":
        _, _, obs = fit.predictive_draws(cand[inputs], seed=seed)
        sd = np.log(np.maximum(obs, 1e-300)).std(axis=0)
        return int(cand.index[int(np.argmax(sd))])
    if strategy not in OURS:
        raise ValueError(strategy)
    sd, power, horizon = None, 1.0, None   # ours_local: its fit is local, next_runs reads the candidates' error
    if strategy == "ours_tau":  # the extrapolation error of the domain: leave-future-out on the whole pool
        fit = fit.with_discrepancy(pool_tau(pool, fit.law.name, inputs, LIKELIHOOD))
    if strategy == "ours_cal" and len(fit.runs) >= 8:
        # the extrapolation error, calibrated by leave-future-out on the runs bought so far (never the targets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fit = fit.calibrate(seed=seed, chains=2, warmup=300, samples=300, progress=False)
            except bs.BayescaleError:   # too few runs left after holding out the largest: choose without it
                pass
    if strategy == "ours_plan":  # plans that at most double the compute spent so far (doubling horizon)
        horizon = float(pool["cost"].sum() - cand["cost"].sum())
    if strategy == "ours_cool":  # cost exponent cooled from 1 to 0 over the protocol's acquisitions
        power = max(0.0, 1.0 - step / n_acquire)
    if strategy == "ours_goal":  # the accuracy asked for, less the run-to-run noise the fit sees
        sig = float(np.median(fit.draws()["sigma"]))
        sd = float(np.sqrt(max(goal_rmsle**2 - sig**2, 0.25 * goal_rmsle**2)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = bs.next_runs(fit, cand[inputs + ["cost"]].assign(pool_idx=cand.index), target=target_q, k=1, seed=seed,
                             search=SearchOptions(n_outcomes=32, max_draws=600, target_sd=sd, cost_power=power,
                                                  horizon=horizon))
    return int(table.iloc[0]["pool_idx"])


class Replay:
    """One strategy's replay on a setup (see :func:`benchmarks._common.chinchilla_setup`): the runs fitted so far,
    and a step after each acquisition."""

    def __init__(self, st: dict, strategy: str, seed: int, draws: int, goal: float | None = None):
        self.st, self.strategy, self.seed, self.draws, self.goal = st, strategy, seed, draws, goal
        pool, start = st["pool"], st["start"]
        self.grid = np.geomspace(pool.loc[start, "cost"].max(), pool["cost"].max(), st["n_acquire"] + 1)[1:]
        self.rng = np.random.default_rng(seed)
        self.local_tau = pool_tau(pool, st["law"], st["inputs"], LIKELIHOOD) if is_local(strategy) else None
        self.chosen = list(start)
        self.avail = [i for i in pool.index if i not in self.chosen]
        self.steps: list[dict] = []
        self._evaluate()

    def _evaluate(self):
        st, k = self.st, len(self.steps)
        train = st["pool"].loc[self.chosen]
        self.fit = fit_short(train, st["law"], st["inputs"], self.draws, self.seed + k, LIKELIHOOD)
        if self.local_tau:
            # the law as a local approximation around the targets (Fit.localize): runs far from them count less
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.fit = self.fit.localize(st["target_q"], tau=self.local_tau, chains=2, warmup=self.draws,
                                             samples=self.draws, seed=self.seed + k)
        err, lpd, sd, z2 = score_fit(self.fit, st["target"], st["y_true"], self.seed)
        self.steps.append({"n": len(self.chosen), "compute": float(train["cost"].sum()), "rmsle": err, "lpd": lpd,
                           "sd": sd, "z2": z2, "ok": bool(self.fit.ok), "last": int(self.chosen[-1])})

    @property
    def compute(self) -> float:
        return self.steps[-1]["compute"]

    def acquire(self) -> bool:
        if not self.avail:
            return False
        k = len(self.steps) - 1
        i = _pick(self.strategy, self.fit, self.st["pool"], self.avail, self.st["target_q"], self.st["inputs"],
                  self.rng, k, self.grid, self.seed + k, self.goal, len(self.grid))
        self.chosen.append(i)
        self.avail.remove(i)
        self._evaluate()
        return True

    def run(self, n: int, until=lambda r: False, cap: int = 0) -> list[dict]:
        """``n`` acquisitions, then on while ``until(self)`` holds and fewer than ``cap`` runs were acquired."""
        while len(self.steps) - 1 < n or (until(self) and len(self.steps) - 1 < cap):
            if not self.acquire():
                break
        return self.steps


# -- single-path suites (chinchilla, ic) ---------------------------------------------------------------------------
def run_suite(st: dict, strategies, seeds: int, draws: int, log, label: str) -> dict:
    """Baselines for the protocol's acquisitions; threshold = the best baseline's final error; ours for as many
    (``ours_goal`` told the threshold); then every strategy that has not reached it keeps acquiring, up to
    ``max_acquire`` runs, while its compute is below the best baseline's compute-to-reach (beyond that it cannot
    win). Returns strategy -> list of step lists (one per seed)."""
    n = st["n_acquire"]
    reps: dict = {}
    for strat in [s for s in strategies if s not in OURS]:
        reps[strat] = []
        for s in range(seeds if strat.removesuffix("+local") == "random" else 1):
            t0 = time.perf_counter()
            r = Replay(st, strat, 100 * s, draws)
            r.run(n)
            reps[strat].append(r)
            log(f"{label} {strat} seed {s}: RMSLE {r.steps[-1]['rmsle']:.4f} at compute {r.compute:.3g} "
                f"({time.perf_counter() - t0:.0f} s)")
    thr = min(float(np.median([r.steps[-1]["rmsle"] for r in rs])) for rs in reps.values())
    for strat in [s for s in strategies if s in OURS]:
        t0 = time.perf_counter()
        r = Replay(st, strat, 0, draws, goal=thr if strat == "ours_goal" else None)
        r.run(n)
        reps[strat] = [r]
        log(f"{label} {strat}: RMSLE {r.steps[-1]['rmsle']:.4f} at compute {r.compute:.3g} "
            f"({time.perf_counter() - t0:.0f} s)")

    def best_reach():
        return min(float(np.median([compute_to_reach(r.steps, thr) for r in rs])) for k, rs in reps.items()
                   if k not in OURS)

    for strat, rs in reps.items():
        for r in rs:
            r.run(n, lambda r: compute_to_reach(r.steps, thr) == float("inf") and r.compute < best_reach(),
                  st["max_acquire"])
            if len(r.steps) - 1 > n:
                log(f"{label} {strat} seed {r.seed // 100} continued to {len(r.steps) - 1} runs: RMSLE "
                    f"{r.steps[-1]['rmsle']:.4f} at compute {r.compute:.3g}")
    return {s: [r.steps for r in rs] for s, rs in reps.items()}


def _goal(traces: dict, n_acquire: int) -> dict:
    """A single-path suite's summary (medians over seeds): the threshold (the best baseline's error after
    ``n_acquire``), each strategy's compute to reach it and looser levels, and ours / the best baseline."""
    def after_n(t):
        return t[min(n_acquire, len(t) - 1)]

    at_n = {s: float(np.median([after_n(t)["rmsle"] for t in tr])) for s, tr in traces.items()}
    base = {s: v for s, v in at_n.items() if s not in OURS}
    best_name = min(base, key=base.get)
    ours = [s for s in OURS if s in traces]

    def ratios(level):
        r_ = {s: float(np.median([compute_to_reach(t, level) for t in tr])) for s, tr in traces.items()}
        b_ = min((v, k) for k, v in r_.items() if k not in OURS)
        rat = {o: (r_[o] / b_[0] if np.isfinite(r_[o]) and np.isfinite(b_[0]) else (0.0 if np.isfinite(r_[o])
                                                                                     else float("inf"))) for o in ours}
        return r_, b_[1], rat

    reach, best_reach_name, rat = ratios(base[best_name])
    start_err = float(np.median([t[0]["rmsle"] for tr in traces.values() for t in tr]))
    levels = {}
    for frac in (0.5, 0.3, 0.2):
        r_, b_, rt = ratios(frac * start_err)
        levels[f"{frac:g}"] = {"rmsle": frac * start_err, "compute_to_reach": r_, "best_baseline": b_, "ratios": rt}
    return {"threshold_rmsle": base[best_name], "threshold_from": best_name, "rmsle_after_n": at_n,
            "final_rmsle": {s: float(np.median([t[-1]["rmsle"] for t in tr])) for s, tr in traces.items()},
            "lpd_after_n": {s: float(np.median([after_n(t)["lpd"] for t in tr])) for s, tr in traces.items()},
            "runs_at_end": {s: float(np.median([t[-1]["n"] for t in tr])) for s, tr in traces.items()},
            "compute_to_reach": reach, "best_baseline": best_reach_name, "start_rmsle": start_err, "levels": levels,
            "ratios": rat}


def feasibility(n_designs: int, draws: int, budget: float, seed: int = 0, log=print) -> dict:
    """How reachable the real Chinchilla threshold is for *any* choice of runs: random designs (the 8-run start plus
    pool runs in random order while the total stays under a log-uniform budget up to ``budget``), each fitted like
    the replay's fits and scored at the targets."""
    st = chinchilla_setup()
    pool, start = st["pool"], st["start"]
    rng = np.random.default_rng(seed)
    base = float(pool.loc[start, "cost"].sum())
    rows = []
    t0 = time.perf_counter()
    for i in range(n_designs):
        cap = float(np.exp(rng.uniform(np.log(2 * base), np.log(budget))))
        chosen, total = list(start), base
        for j in rng.permutation([k for k in pool.index if k not in start]):
            if total + pool.loc[j, "cost"] <= cap:
                chosen.append(int(j))
                total += float(pool.loc[j, "cost"])
        fit = fit_short(pool.loc[chosen], "chinchilla", ["N", "D"], draws, seed + i, LIKELIHOOD)
        err, lpd, sd, _ = score_fit(fit, st["target"], st["y_true"], seed)
        rows.append({"compute": total, "runs": len(chosen), "rmsle": err, "lpd": lpd, "sd": sd})
        if (i + 1) % 50 == 0:
            log(f"feasibility: {i + 1} designs ({time.perf_counter() - t0:.0f} s)")
    return {"designs": rows, "seed": seed, "draws": draws, "budget": budget}


def _residual_check(draws: int) -> dict:
    """Fit chinchilla to the whole real pool: how well it fits runs with D/N < 1 against the rest."""
    st = chinchilla_setup()
    pool = st["pool"]
    fit = fit_short(pool, "chinchilla", ["N", "D"], draws, 0, LIKELIHOOD)
    res = np.abs(np.log(pool["y"].to_numpy() / fit.predict(pool[["N", "D"]])["curve_median"].values))
    low = (pool["D"] / pool["N"] < 1).to_numpy()
    return {"n_low": int(low.sum()), "median_abs_log_resid_low": float(np.median(res[low])),
            "median_abs_log_resid_rest": float(np.median(res[~low])), "max_low": float(res[low].max()),
            "max_rest": float(res[~low].max())}


def suite_chinchilla(strategies, draws: int, seeds: int, n_feasibility: int, log) -> dict:
    st = chinchilla_setup()
    traces = run_suite(st, strategies, seeds, draws, log, "chinchilla")
    goal = _goal(traces, st["n_acquire"])
    out = {"traces": traces, "goal": goal, "pool": len(st["pool"]), "targets": len(st["target"]),
           "start": len(st["start"]), "acquire": st["n_acquire"], "max_acquire": st["max_acquire"],
           "law": "chinchilla", "cost": "6ND", "residuals": _residual_check(draws)}
    if n_feasibility:
        reach = goal["compute_to_reach"][goal["best_baseline"]]
        budget = reach if np.isfinite(reach) else max(t[-1]["compute"] for k, tr in traces.items() if k not in OURS
                                                      for t in tr)
        out["feasibility"] = feasibility(n_feasibility, draws, budget, log=log)
    return out


def suite_ic(strategies, draws: int, seeds: int, n_curves: int, log) -> dict:
    import bayescale as bs

    data = bs.datasets.revisiting()
    ic = data[data["domain"] == "IC"]
    curves = sorted(ic["curve"].unique())
    rng = np.random.default_rng(0)
    pick = [curves[i] for i in sorted(rng.choice(len(curves), size=min(n_curves, len(curves)), replace=False))]
    per_curve = {}
    for c in pick:
        cur = ic[ic["curve"] == c]
        pool = cur[cur["train"]][["x", "y"]].drop_duplicates("x").sort_values("x").reset_index(drop=True)
        pool["cost"] = pool["x"]
        target = cur[~cur["train"]][["x", "y"]].reset_index(drop=True)
        if len(pool) < 9 or len(target) == 0:
            continue
        st = dict(pool=pool, start=list(range(4)), n_acquire=5, max_acquire=12, target=target[["x"]],
                  y_true=target["y"].to_numpy(), target_q=pd.DataFrame({"x": np.quantile(target["x"],
                                                                                          np.linspace(0, 1, 16))}),
                  law="M2", inputs=["x"])
        traces = run_suite(st, strategies, seeds, draws, lambda m: None, c)
        g = _goal(traces, st["n_acquire"])
        per_curve[c] = {"traces": traces, "goal": g, "pool": len(pool), "targets": len(target),
                        "pool_max_cost": float(pool["cost"].max())}
        log(f"ic {c}: threshold {g['threshold_rmsle']:.4f}; compute to reach: "
            + ", ".join(f"{k} {v:.3g}" for k, v in g["compute_to_reach"].items()))
    return {"curves": per_curve, "law": "M2", "cost": "x", "start": 4, "acquire": 5, "max_acquire": 12}


# -- many-world suites (starts, starts_dn1, sim) -------------------------------------------------------------------
def sim_setup(world: int) -> dict:
    """World ``world``: the real Chinchilla (N, D) design, y = the law x lognormal 1% noise (seed = world). The
    targets' true values are the noise-free law: the error is that of the predicted loss curve, which no run's
    noise can blur, so error levels below the noise of one run are meaningful."""
    return {**chinchilla_setup(runs=simulated_chinchilla(world)), "max_acquire": 120}


def suite_worlds(setups, strategies, draws: int, log, label: str) -> list[dict]:
    """Per world: the baselines for the protocol's acquisitions; ours on, up to ``max_acquire`` runs, while its
    compute is below the most any baseline spent in that world, so that every strategy's curve reaches as far."""
    per_world = []
    for w, st in enumerate(setups):
        traces = {}
        for strat in sorted(strategies, key=lambda s: s in OURS):
            t0 = time.perf_counter()
            r = Replay(st, strat, 100 * w, draws)
            if strat in OURS:
                cap = max(t[-1]["compute"] for k, t in traces.items() if k not in OURS)
                r.run(st["n_acquire"], lambda r: r.compute < cap, st["max_acquire"])
            else:
                r.run(st["n_acquire"])
            traces[strat] = r.steps
            log(f"{label} {w} {strat}: error {r.steps[-1]['rmsle']:.4f} at compute {r.compute:.3g} after "
                f"{r.steps[-1]['n']} runs ({time.perf_counter() - t0:.0f} s)")
        per_world.append(traces)
    return per_world


def suite_starts(strategies, draws: int, starts: int, log, min_tokens_per_param: float = 0.0) -> dict:
    """The real Chinchilla replay from several start sets, pooled like the simulated worlds: one real pool has one
    noise draw and one misspecification, so only the path's luck is averaged out."""
    setups = [starts_setup(w, min_tokens_per_param) for w in range(starts)]
    worlds = suite_worlds(setups, strategies, draws, log, "start set")
    return {"worlds": worlds, "summary": pooled_summary(worlds), "law": "chinchilla", "start": 8, "acquire": 12,
            "max_acquire": 60, "cost": "6ND", "min_tokens_per_param": min_tokens_per_param,
            "pool": len(setups[0]["pool"])}


def suite_sim(strategies, draws: int, worlds: int, log) -> dict:
    per_world = suite_worlds((sim_setup(w) for w in range(worlds)), strategies, draws, log, "sim world")
    return {"worlds": per_world, "summary": pooled_summary(per_world), "law": "chinchilla", "true_law": HOFFMANN,
            "noise": 0.01, "start": 8, "acquire": 12, "max_acquire": 120, "cost": "6ND"}


# -- figure and tables ---------------------------------------------------------------------------------------------
def _plot(result: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = [s for s in ("chinchilla", "starts", "starts_dn1", "sim", "ic") if s in result["suites"]]
    if "sim" in suites:
        suites.insert(suites.index("sim") + 1, "sim_sd")
    ncol = min(3, len(suites))
    nrow = -(-len(suites) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 4.2 * nrow), squeeze=False)
    for ax in axes.ravel()[len(suites):]:
        ax.set_visible(False)

    class _Colors(dict):   # a baseline with the local fit: its rule's colour (drawn dotted)
        def __missing__(self, key):
            return self[key.removesuffix("+local")]

    colors = _Colors({"ours": "C3", "ours_goal": "C4", "ours_cool": "C5", "ours_plan": "C6", "ours_cal": "C8",
                      "ours_tau": "C9", "ours_local": "darkred", "random": "0.5", "cheapest": "C0", "grid": "C2",
                      "uncertain": "C1"})

    def style(strat):
        return dict(color=colors[strat], lw=2 if strat in OURS else 1,
                    ls="--" if strat == "ours_goal" else ":" if strat.endswith("+local") else "-")

    for ax, name in zip(axes.ravel(), suites):
        r = result["suites"][name.removesuffix("_sd")]
        ax.set_xlabel("compute spent on pilot runs (FLOP)")
        ax.set_ylabel("RMSLE at the held-out targets")
        if name in ("sim", "sim_sd", "starts", "starts_dn1"):
            sm = r["summary"]
            for strat, cv in sm["sd_curves" if name == "sim_sd" else "curves"].items():
                ax.step(sm["curve_grid"], cv, where="post", **style(strat),
                        label=f"{strat} (mean z^2 {sm['z2'][strat]:.2f})" if name == "sim_sd" else strat)
            if name == "sim_sd":
                ax.set_title("Same worlds: posterior sd of the log target (what the acquisition narrows)", fontsize=9)
                ax.set_ylabel("posterior sd of log loss at the targets (rms over worlds)")
            else:
                ax.axhline(sm["levels"]["threshold"]["rmsle"], color="k", ls=":", lw=1,
                           label="threshold (best baseline after 12)")
                ax.set_title(f"Chinchilla design, simulated ({sm['worlds']} worlds): error vs the true curve (rms)"
                             if name == "sim" else f"Chinchilla (real{', D/N >= 1' if name.endswith('dn1') else ''})"
                             f" from {sm['worlds']} start sets: RMSLE (rms)", fontsize=9)
        elif name == "chinchilla":
            for strat, trs in r["traces"].items():
                for j, tr in enumerate(trs):
                    ax.plot([s["compute"] for s in tr], [s["rmsle"] for s in tr], marker="o", ms=3, **style(strat),
                            alpha=1 if strat != "random" else 0.5, label=strat if j == 0 else None)
            ax.axhline(r["goal"]["threshold_rmsle"], color="k", ls=":", lw=1, label="threshold (best baseline, end)")
            ax.set_title(f"Chinchilla (real): start {r['start']} cheapest, +{r['acquire']}; target {r['targets']} "
                         "runs >= 1e21 FLOP", fontsize=9)
        else:   # median over curves of the error after each acquisition, against compute / the largest pool run
            first = next(iter(r["curves"].values()))["traces"]
            for strat in [s for s in (*OURS, *BASELINES) if s in first]:
                trs = [(c["traces"][strat][0], c["pool_max_cost"]) for c in r["curves"].values()]
                comp = [[s["compute"] / cmax for s in tr] for tr, cmax in trs]
                err = [[s["rmsle"] for s in tr] for tr, _ in trs]
                k = min(map(len, comp))
                ax.plot(np.median([x[:k] for x in comp], axis=0), np.median([e[:k] for e in err], axis=0),
                        marker="o", ms=3, **style(strat), label=strat)
            ax.set_title(f"IC curves ({len(r['curves'])}), M2: 4 smallest x, +5; median over curves", fontsize=9)
            ax.set_xlabel("compute spent / largest pool run (sum of x)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _at_grid(worlds: list[dict], s: str, key: str) -> float:
    """``key`` of strategy ``s`` after its last acquisition within the grid's final compute in each world: RMSLE
    pooled as the root mean square over the worlds, other keys as the mean (issue 16: as accurate as the grid for
    no more compute)."""
    vals = [float(held(w[s], np.array([w["grid"][-1]["compute"]]), key)[0]) for w in worlds]
    return float(np.sqrt(np.nanmean(np.square(vals)))) if key == "rmsle" else float(np.nanmean(vals))


def _pooled_rows(sm: dict, worlds: list[dict]) -> list[list]:
    lv = sm["levels"]
    return [[s, f"{sm['error_after_n'][s]:.4f}", f"{sm['compute_after_n'][s]:.3g}", f"{sm['runs_at_end'][s]:.0f}",
             f"{sm['final'][s]:.4f}", f"{_at_grid(worlds, s, 'rmsle'):.4f}", f"{_at_grid(worlds, s, 'lpd'):.2f}",
             *(f"{v['compute_to_reach'][s]:.3g}" for v in lv.values())]
            for s in sm["curves"]]


def tables(out: Path = RESULTS) -> list[Table]:
    return [t for lik in NOISE_MODELS for t in _tables(out, lik)]


def _tables(out: Path, likelihood: str) -> list[Table]:
    file, tag = _file(likelihood), suffix(likelihood)
    res = load_json(out / file)
    if res is None:
        return []
    runs = res.get("runs") or []
    history = ("" if len(runs) < 2 else f"{len(runs)} invocations of an earlier version of this script, which added "
               "strategies, worlds and designs to the saved file (its `runs` lists them)")
    su = res["suites"]

    def source(suite: str) -> tuple[str, str]:
        """The command and source line of a suite's tables: its own run's when it was rerun alone (``run``)."""
        run = su[suite].get("run", res)
        cmd = "python -m benchmarks.active_learning" if history else run["command"]
        return cmd, (f"{run['machine']}, {run['timestamp']}; NUTS 2 chains x ({res['draws']} warm-up + "
                     f"{res['draws']} draws) per refit, {res.get('likelihood', LEGACY_LIKELIHOOD)} noise, "
                     f"{run.get('seeds', res['seeds'])} seeds for random; {shown(out / file)}")

    def table(name, header, rows, suite):
        return Table(name + tag, *source(suite), header, rows, history)

    out_tables = []
    if "chinchilla" in su:
        r = su["chinchilla"]
        g, n = r["goal"], r["acquire"]
        lv = g["levels"]
        out_tables.append(table("replay_chinchilla", [
            "strategy", f"RMSLE after {n} runs", f"log density after {n}", f"compute after {n} runs",
            "runs at the end", "RMSLE at the end", "compute to reach threshold",
            *(f"to reach {v['rmsle']:.4f}" for v in lv.values())], [
            [s, f"{g['rmsle_after_n'][s]:.4f}", f"{g['lpd_after_n'][s]:.2f}",
             f"{np.median([t[min(n, len(t) - 1)]['compute'] for t in trs]):.3g}", f"{g['runs_at_end'][s]:.0f}",
             f"{g['final_rmsle'][s]:.4f}", f"{g['compute_to_reach'][s]:.3g}",
             *(f"{v['compute_to_reach'][s]:.3g}" for v in lv.values())] for s, trs in r["traces"].items()],
            "chinchilla"))
        if r.get("feasibility"):
            d = pd.DataFrame(r["feasibility"]["designs"])
            reach, thr = g["compute_to_reach"][g["best_baseline"]], g["threshold_rmsle"]
            rows = []
            for label, part in ((f"at most half of {g['best_baseline']}'s {reach:.3g}", d[d["compute"] <= 0.5 * reach]),
                                ("more", d[d["compute"] > 0.5 * reach])):
                q = part["rmsle"].quantile([0.05, 0.5]) if len(part) else pd.Series([np.nan, np.nan])
                rows.append([label, len(part), int((part["rmsle"] <= thr).sum()), f"{q.iloc[0]:.4f}",
                             f"{q.iloc[1]:.4f}"])
            out_tables.append(table("replay_chinchilla_feasibility", [
                "random designs spending (FLOP)", "designs", f"reach the threshold {thr:.4f}",
                "RMSLE, 5th percentile", "RMSLE, median"], rows, "chinchilla"))
    for key in ("starts", "starts_dn1", "sim"):
        if key not in su:
            continue
        sm = su[key]["summary"]
        lv = sm["levels"]
        out_tables.append(table(f"replay_{key}", [
            "strategy", "error after 12 runs", "mean compute after 12", "runs at the end", "error at the end",
            "error at the grid's final compute", "log density there",
            *(f"to reach {k} ({v['rmsle']:.4f})" for k, v in lv.items())], _pooled_rows(sm, su[key]["worlds"]), key))
        out_tables.append(levels_table(f"replay_{key}_levels{tag}", sm, "worlds" if key == "sim" else "start sets",
                                       *source(key), history))
    if "sim" in su:
        sm = su["sim"]["summary"]
        sl = sm["sd_levels"]
        out_tables.append(table("replay_sim_sd", [
            "strategy", "sd after 12 runs", "mean z^2", *(f"to reach sd {k} ({v['sd']:.4f})" for k, v in sl.items())],
            [[s, f"{sm['sd_after_n'][s]:.4f}", f"{sm['z2'][s]:.2f}",
              *(f"{v['compute_to_reach'][s]:.3g}" for v in sl.values())] for s in sm["sd_curves"]], "sim"))
    if "ic" in su:
        cv = su["ic"]["curves"]
        first = next(iter(cv.values()))["traces"]
        variants = [o for o in OURS if o in first]
        cols = [*variants, *BASELINES, *(b for b in first if b.endswith("+local"))]
        out_tables.append(table("replay_ic", ["curve", "threshold", *cols, *(f"{o} / best" for o in variants)], [
            [c, f"{v['goal']['threshold_rmsle']:.4f}",
             *(f"{v['goal']['compute_to_reach'].get(k, float('nan')):.3g}" for k in cols),
             *(f"{v['goal']['ratios'].get(o, float('nan')):.3g}" for o in variants)] for c, v in cv.items()], "ic"))
    return out_tables


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.active_learning", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", default=",".join(STRATEGIES), help="comma list of %(default)s")
    ap.add_argument("--strategies", help="comma list replayed in every suite (default: each suite's STRATEGIES)")
    ap.add_argument("--draws", type=int, default=300, help="NUTS warm-up and draws per chain of each refit")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the random strategy (chinchilla; ic: one fewer)")
    ap.add_argument("--starts", type=int, default=16, help="start sets of the starts suites")
    ap.add_argument("--worlds", type=int, default=32, help="simulated worlds (noise seeds) of the sim suite")
    ap.add_argument("--curves", type=int, default=8, help="IC curves")
    ap.add_argument("--feasibility", type=int, default=500, help="random designs of the real Chinchilla pool")
    ap.add_argument("--likelihood", choices=NOISE_MODELS, default=LEGACY_LIKELIHOOD,
                    help="every refit's noise model (default %(default)s, as the published tables; bs.fit's default "
                         "is logstudentt)")
    output_args(ap)
    args = ap.parse_args(argv)
    global LIKELIHOOD
    LIKELIHOOD = args.likelihood
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = set(suites) - set(STRATEGIES)
    if unknown:
        ap.error(f"unknown suites {sorted(unknown)}; choose from {', '.join(STRATEGIES)}")
    if args.strategies and all(s in OURS for s in args.strategies.split(",")):
        ap.error("--strategies needs a baseline: the threshold and ours' budget are the baselines'")
    t0 = time.perf_counter()

    def log(msg):
        print(msg, flush=True)

    def strategies(suite):
        return args.strategies.split(",") if args.strategies else STRATEGIES[suite]

    run = {"command": command_line("active_learning", argv), "timestamp": now(), "machine": machine_line(),
           "seeds": args.seeds}
    result = {**run, "draws": args.draws, "likelihood": args.likelihood, "suites": {}}
    path = args.out / _file(args.likelihood)
    earlier = load_json(path)
    if earlier and earlier.get("draws") == args.draws and not earlier.get("runs"):
        # suites not rerun keep their results, each with the run that made it (its tables' command)
        result["suites"] = {k: {"run": {f: earlier[f] for f in run}, **v} if "run" not in v else v
                            for k, v in earlier["suites"].items() if k not in suites}
    elif earlier:
        log(f"{path}: made with --draws {earlier.get('draws')} or by an earlier version of this script; replaced")
    for name in suites:
        if name == "chinchilla":
            r = suite_chinchilla(strategies(name), args.draws, args.seeds, args.feasibility, log)
        elif name in ("starts", "starts_dn1"):
            r = suite_starts(strategies(name), args.draws, args.starts, log, 1.0 if name == "starts_dn1" else 0.0)
        elif name == "sim":
            r = suite_sim(strategies(name), args.draws, args.worlds, log)
        else:
            r = suite_ic(strategies(name), args.draws, max(1, args.seeds - 1), args.curves, log)
        result["suites"][name] = {**r, "run": run}
        result["elapsed_s"] = time.perf_counter() - t0
        save_json(path, result)  # partial results survive an interruption
    _plot(result, args.out / _file(args.likelihood, "png"))
    publish(tables, args)
    return result


if __name__ == "__main__":
    main()
