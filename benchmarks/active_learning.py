"""Replay of run selection on real scaling data: does choosing runs by expected variance reduction per unit cost
reach a target accuracy with less compute than the usual choices?

Protocol (per suite): start from the cheapest runs of a real pool, acquire runs from the pool one at a time, refit
with NUTS after each acquisition, and track the target's error (RMSLE of the posterior predictive median at the
held-out target runs) and mean log predictive density against the compute spent (sum of the costs of every run
fitted so far). Strategies:

- ``ours``: :func:`bayescale.next_runs` (k=1; expected reduction of the target's posterior variance per unit cost,
  importance-reweighted fantasies), target = the held-out runs;
- ``ours_goal``: the same, told the accuracy to reach (an RMSLE level, as a posterior sd after the fit's noise): each
  pick is the cheapest run expected to get there, else the best per unit cost (``next_runs(target_sd=...)``). In
  the main run it is told the strict threshold below; ``--goal-level 0.3`` replays it told 0.3 x the starting RMSLE
  (a level the baselines reach), which is the level its ratio should be read at;
- ``ours_cool`` (added after the first replay, ``--add ours_cool``): the score divides by cost**p with p falling
  from 1 to 0 over the protocol's acquisitions (``next_runs(cost_power=p)``);
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

Suites:

- ``chinchilla``: Epoch AI's Chinchilla runs; pool = runs below 1e21 FLOP, start = the 8 cheapest, acquire 12
  (20 runs at the end), target = the 23 runs at or above 1e21 FLOP; law ``chinchilla``; cost 6ND.
- ``sim``: the Chinchilla design with losses simulated from Hoffmann et al.'s law (1% noise), in ``--worlds`` noise
  draws; the error is against the noise-free law and pooled over the worlds (the law is right by construction: this
  is where the acquisition is tuned and where its efficiency can be seen apart from misspecification).
- ``starts``/``starts_dn1``: the real Chinchilla replay from 16 start sets (8 of the 20 cheapest), pooled; dn1
  restricts the pool to D/N >= 1.
- ``ic``: curves of the revisiting benchmark's IC domain with NSL-PFN's protocol: pool = the fit split, start =
  the 4 smallest x, acquire 5 (9 at the end), target = the held-out split (largest x); law ``M2``; cost x.

Goal: the accuracy the best baseline has after the protocol's acquisitions (its RMSLE then: the threshold) reached
by ``ours`` with at most half the compute that the best baseline needs to first reach it. A fixed number of runs
would favour strategies that buy expensive runs, so every strategy that has not reached the threshold keeps
acquiring (up to a cap: 60 runs for Chinchilla, 120 in the simulated worlds, 12 for IC) while its compute is still
below the best baseline's compute-to-reach; "compute to reach" is the compute spent when the RMSLE first falls to the
threshold. ``--feasibility N`` fits N random designs of the real Chinchilla pool: how reachable the threshold is at
half the compute by any choice of runs.

Run: ``python -m benchmarks.active_learning [--suites chinchilla,sim,ic] [--worlds 16] [--curves 8] [--draws 300]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from benchmarks._common import RESULTS_MD, ROOT, update_markdown

OUT = ROOT / "benchmarks" / "results"
BASELINES = ("random", "cheapest", "grid", "uncertain")
LEVELS = (0.5, 0.3, 0.2)  # looser accuracy levels: fractions of the starting fit's RMSLE


def _fit(train: pd.DataFrame, law: str, inputs: dict, draws: int, seed: int):
    import bayescale as bs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bs.fit(train, law, inputs=inputs, y="y", chains=2, warmup=draws, samples=draws, seed=seed,
                      progress=False)


def _score(fit, target: pd.DataFrame, y_true: np.ndarray, seed: int) -> tuple[float, float, float, float]:
    """RMSLE of the predictive median, mean log predictive density, the posterior sd of the log mean curve (mean
    over targets: the uncertainty the acquisition narrows) and the mean squared z of the truth under it (~1 when
    calibrated; meaningful where ``y_true`` is a noise-free curve)."""
    from bayescale.scoring import rmsle

    _, mu, obs = fit.predictive_draws(target, seed=seed)
    med = np.median(obs, axis=0)
    lpd = float(np.mean(fit.log_predictive_density(target, y_true)))
    lmu = np.log(np.maximum(mu, 1e-300))
    sd = lmu.std(axis=0)
    z2 = float(np.mean(((np.median(lmu, axis=0) - np.log(y_true)) / np.maximum(sd, 1e-12)) ** 2))
    return float(rmsle(med, y_true)), lpd, float(sd.mean()), z2


def _pick(strategy: str, fit, pool: pd.DataFrame, avail: list, target_q: pd.DataFrame, inputs: list, rng, step: int,
          grid: np.ndarray, seed: int, goal_rmsle: float | None = None, n_acquire: int = 12) -> int:
    from bayescale.next_runs import next_runs

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
    if strategy in ("ours", "ours_goal", "ours_cool", "ours_plan", "ours_cal", "ours_tau", "ours_local"):
        sd, power, horizon = None, 1.0, None   # ours_local: its fit is local, next_runs reads the candidates' error
        if strategy == "ours_tau":  # the extrapolation error of the domain: leave-future-out on the whole pool
            fit = fit.with_discrepancy(_pool_tau(pool, fit.law.name, inputs))
        if strategy == "ours_cal" and len(fit.runs) >= 8:
            # the extrapolation error, calibrated by leave-future-out on the runs bought so far (never the targets)
            from bayescale.errors import BayescaleError

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    fit = fit.calibrate(seed=seed, chains=2, warmup=300, samples=300, progress=False)
                except BayescaleError:   # too few runs left after holding out the largest: choose without it
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
            table = next_runs(fit, cand[inputs + ["cost"]].assign(pool_idx=cand.index), target=target_q, k=1,
                              seed=seed, n_outcomes=32, max_draws=600, target_sd=sd, cost_power=power,
                              horizon=horizon)
        return int(table.iloc[0]["pool_idx"])
    raise ValueError(strategy)


_TAU = {}


def _pool_tau(pool: pd.DataFrame, law: str, inputs: list) -> float:
    """tau (ln-units per decade beyond the runs) by leave-future-out on the whole pool: the fit split, never the
    targets. What a user would know about the domain's extrapolation error from earlier runs of that kind."""
    key = (law, int(pd.util.hash_pandas_object(pool[inputs + ["y"]], index=False).sum()))
    if key not in _TAU:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = _fit(pool, law, {c: c for c in inputs}, 300, 0)
            _TAU[key] = f.calibrate(seed=0, chains=2, warmup=300, samples=300, progress=False).discrepancy
    return _TAU[key]


def compute_to_reach(steps: list[dict], threshold: float) -> float:
    """Compute spent when the error first falls to ``threshold`` or below (inf if never)."""
    for s in steps:
        if s["rmsle"] <= threshold * (1 + 1e-12):
            return s["compute"]
    return float("inf")


OURS = ("ours", "ours_goal", "ours_cool", "ours_plan", "ours_cal", "ours_tau", "ours_local")


def _goal(traces: dict, n_acquire: int) -> dict:
    """traces: strategy -> list of step lists (one per seed). Threshold = best baseline's error after n_acquire."""
    at_n = {s: float(np.median([t[min(n_acquire, len(t) - 1)]["rmsle"] for t in tr])) for s, tr in traces.items()}
    finals = {s: float(np.median([t[-1]["rmsle"] for t in tr])) for s, tr in traces.items()}
    base = {s: v for s, v in at_n.items() if s not in OURS}
    best_name = min(base, key=base.get)
    thr = base[best_name]
    ours = [s for s in OURS if s in traces]

    def ratios(level):
        r_ = {s: float(np.median([compute_to_reach(t, level) for t in tr])) for s, tr in traces.items()}
        b_ = min((v, k) for k, v in r_.items() if k not in OURS)
        rat = {o: (r_[o] / b_[0] if np.isfinite(r_[o]) and np.isfinite(b_[0]) else (0.0 if np.isfinite(r_[o])
                                                                                     else float("inf"))) for o in ours}
        return r_, b_[1], rat

    reach, best_reach_name, rat = ratios(thr)
    start_err = float(np.median([t[0]["rmsle"] for tr in traces.values() for t in tr]))
    levels = {}
    for frac in LEVELS:
        r_, b_, rt = ratios(frac * start_err)
        levels[f"{frac:g}"] = {"rmsle": frac * start_err, "compute_to_reach": r_, "best_baseline": b_,
                               "ratio": rt["ours"], "met": bool(rt["ours"] <= 0.5), "ratios": rt,
                               "ratio_goal": rt.get("ours_goal", float("nan")),
                               "met_goal": bool(rt.get("ours_goal", float("inf")) <= 0.5)}
    return {"threshold_rmsle": thr, "threshold_from": best_name, "rmsle_after_n": at_n, "final_rmsle": finals,
            "lpd_after_n": {s: float(np.median([t[min(n_acquire, len(t) - 1)]["lpd"] for t in tr]))
                            for s, tr in traces.items()},
            "runs_at_end": {s: float(np.median([t[-1]["n"] for t in tr])) for s, tr in traces.items()},
            "compute_to_reach": reach, "best_baseline": best_reach_name, "ratio_ours_to_best": rat["ours"],
            "met": bool(rat["ours"] <= 0.5), "ratio_goal_to_best": rat.get("ours_goal", float("nan")),
            "met_goal": bool(rat.get("ours_goal", float("inf")) <= 0.5), "start_rmsle": start_err, "levels": levels,
            "ratios": rat, "met_by": {o: bool(v <= 0.5) for o, v in rat.items()}}


def _is_local(strategy: str) -> bool:
    """Strategies that fit the law locally around the targets: ours_local, and each baseline's rule with that fit
    ("grid+local", ...), so that the fit's own gain is not credited to the choice of runs."""
    return strategy == "ours_local" or strategy.endswith("+local")


class Replay:
    """One strategy's replay: the runs fitted so far, and a step after each acquisition."""

    def __init__(self, pool, start, target, y_true, target_q, law, inputs, strategy, seed, draws, grid, goal=None):
        self.goal = goal
        self.pool, self.target, self.y_true, self.target_q = pool, target, y_true, target_q
        self.law, self.inputs, self.strategy, self.seed, self.draws, self.grid = law, inputs, strategy, seed, draws, grid
        self.rng = np.random.default_rng(seed)
        self.local_tau = _pool_tau(pool, law, inputs) if _is_local(strategy) else None
        self.chosen = list(start)
        self.avail = [i for i in pool.index if i not in self.chosen]
        self.steps: list[dict] = []
        self.fit = None
        self._evaluate()

    def _evaluate(self):
        train = self.pool.loc[self.chosen]
        k = len(self.steps)
        self.fit = _fit(train, self.law, {c: c for c in self.inputs}, self.draws, self.seed + k)
        if self.local_tau:
            # the law as a local approximation around the targets (Fit.localize): runs far from them count less
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.fit = self.fit.localize(self.target_q, tau=self.local_tau, chains=2, warmup=self.draws,
                                             samples=self.draws, seed=self.seed + k)
        err, lpd, sd, z2 = _score(self.fit, self.target, self.y_true, self.seed)
        self.steps.append({"n": len(self.chosen), "compute": float(train["cost"].sum()), "rmsle": err, "lpd": lpd,
                           "sd": sd, "z2": z2,
                           "ok": bool(self.fit.ok), "last": int(self.chosen[-1])})

    @property
    def compute(self) -> float:
        return self.steps[-1]["compute"]

    def acquire(self) -> bool:
        if not self.avail:
            return False
        k = len(self.steps) - 1
        i = _pick(self.strategy, self.fit, self.pool, self.avail, self.target_q, self.inputs, self.rng, k, self.grid,
                  self.seed + k, self.goal, len(self.grid))
        self.chosen.append(i)
        self.avail.remove(i)
        self._evaluate()
        return True


def run_suite(pool, start, n_acquire, max_acquire, target, y_true, target_q, law, inputs, seeds, draws, log, label):
    """Baselines for ``n_acquire`` runs; threshold = the best baseline's final error; then every strategy (ours
    included) that has not reached it keeps acquiring, up to ``max_acquire`` runs, while its compute is below the
    best baseline's compute-to-reach (beyond that it cannot win)."""
    lo, hi = pool.loc[start, "cost"].max(), pool["cost"].max()
    grid = np.geomspace(lo, hi, n_acquire + 1)[1:]
    reps = {}
    for strat in BASELINES:
        reps[strat] = []
        for s in range(seeds if strat == "random" else 1):
            t0 = time.perf_counter()
            r = Replay(pool, start, target, y_true, target_q, law, inputs, strat, 100 * s, draws, grid)
            for _ in range(n_acquire):
                if not r.acquire():
                    break
            reps[strat].append(r)
            log(f"{label} {strat} seed {s}: RMSLE {r.steps[-1]['rmsle']:.4f} at compute {r.compute:.3g} "
                f"({time.perf_counter() - t0:.0f} s)")
    thr = min(float(np.median([r.steps[-1]["rmsle"] for r in rs])) for rs in reps.values())

    def best_reach():
        return min(float(np.median([compute_to_reach(r.steps, thr) for r in rs])) for rs in reps.values())

    t0 = time.perf_counter()
    ours = Replay(pool, start, target, y_true, target_q, law, inputs, "ours", 0, draws, grid)
    reps["ours"] = [ours]
    for _ in range(n_acquire):
        if not ours.acquire():
            break
    log(f"{label} ours: RMSLE {ours.steps[-1]['rmsle']:.4f} at compute {ours.compute:.3g} ({time.perf_counter() - t0:.0f} s)")
    t0 = time.perf_counter()
    goal = Replay(pool, start, target, y_true, target_q, law, inputs, "ours_goal", 0, draws, grid, goal=thr)
    reps["ours_goal"] = [goal]
    for _ in range(n_acquire):
        if not goal.acquire():
            break
    log(f"{label} ours_goal: RMSLE {goal.steps[-1]['rmsle']:.4f} at compute {goal.compute:.3g} "
        f"({time.perf_counter() - t0:.0f} s)")
    # continuation: anyone not yet at the threshold and still cheaper than the best baseline's compute-to-reach
    for strat, rs in reps.items():
        for r in rs:
            while (compute_to_reach(r.steps, thr) == float("inf") and r.compute < best_reach()
                   and len(r.steps) - 1 < max_acquire and r.acquire()):
                pass
            if len(r.steps) - 1 > n_acquire:
                log(f"{label} {strat} seed {r.seed // 100} continued to {len(r.steps) - 1} runs: RMSLE "
                    f"{r.steps[-1]['rmsle']:.4f} at compute {r.compute:.3g}")
    traces = {s: [r.steps for r in rs] for s, rs in reps.items()}
    return traces, thr


def _chinchilla_setup(min_tokens_per_param: float = 0.0):
    import bayescale as bs

    runs = bs.datasets.chinchilla().rename(columns={"loss": "y"})
    runs["cost"] = runs["C"]
    pool = runs[(runs["C"] < 1e21) & (runs["D"] >= min_tokens_per_param * runs["N"])].reset_index(drop=True)
    target = runs[runs["C"] >= 1e21].reset_index(drop=True)
    return dict(pool=pool, start=list(pool["cost"].nsmallest(8).index), n_acquire=12, max_acquire=60,
                target=target[["N", "D"]], y_true=target["y"].to_numpy(), target_q=target[["N", "D"]],
                law="chinchilla", inputs=["N", "D"])


def _ic_setup(curve: str):
    import bayescale as bs

    data = bs.datasets.revisiting()
    cur = data[data["curve"] == curve]
    pool = cur[cur["train"]][["x", "y"]].drop_duplicates("x").sort_values("x").reset_index(drop=True)
    pool["cost"] = pool["x"]
    target = cur[~cur["train"]][["x", "y"]].reset_index(drop=True)
    tq = pd.DataFrame({"x": np.quantile(target["x"], np.linspace(0, 1, 16))})
    return dict(pool=pool, start=list(range(4)), n_acquire=5, max_acquire=12, target=target[["x"]],
                y_true=target["y"].to_numpy(), target_q=tq, law="M2", inputs=["x"])


def rerun_strategy(traces: dict, setup: dict, strategy: str, draws: int) -> list[dict]:
    """Replay one more strategy against saved traces: the protocol's acquisitions, then on while it has not reached
    the strict threshold and its compute is below the best baseline's compute to reach it (capped)."""
    thr = min(float(np.median([t[min(setup["n_acquire"], len(t) - 1)]["rmsle"] for t in tr]))
              for k, tr in traces.items() if k not in OURS)
    base_reach = min(float(np.median([compute_to_reach(t, thr) for t in tr])) for k, tr in traces.items() if k not in OURS)
    pool, start = setup["pool"], setup["start"]
    grid = np.geomspace(pool.loc[start, "cost"].max(), pool["cost"].max(), setup["n_acquire"] + 1)[1:]
    r = Replay(pool, start, setup["target"], setup["y_true"], setup["target_q"], setup["law"], setup["inputs"],
               strategy, 0, draws, grid)
    while len(r.steps) - 1 < setup["n_acquire"] or (strategy in OURS and compute_to_reach(r.steps, thr) == float("inf")
                                                     and r.compute < base_reach
                                                     and len(r.steps) - 1 < setup["max_acquire"]):
        if not r.acquire():
            break
    return r.steps


def rerun_goal(traces: dict, setup: dict, frac: float, draws: int) -> dict:
    """Replay ``ours_goal`` told to reach ``frac`` x the starting RMSLE (a level the baselines reach), continuing
    while it has not and its compute is below the best baseline's compute to reach that level."""
    start_err = float(np.median([t[0]["rmsle"] for tr in traces.values() for t in tr]))
    level = frac * start_err
    base_reach = min(float(np.median([compute_to_reach(t, level) for t in tr]))
                     for k, tr in traces.items() if k not in OURS)
    pool, start = setup["pool"], setup["start"]
    grid = np.geomspace(pool.loc[start, "cost"].max(), pool["cost"].max(), setup["n_acquire"] + 1)[1:]
    r = Replay(pool, start, setup["target"], setup["y_true"], setup["target_q"], setup["law"], setup["inputs"],
               "ours_goal", 0, draws, grid, goal=level)
    while len(r.steps) - 1 < setup["n_acquire"] or (compute_to_reach(r.steps, level) == float("inf")
                                                     and r.compute < base_reach
                                                     and len(r.steps) - 1 < setup["max_acquire"]):
        if not r.acquire():
            break
    return {"steps": r.steps, "level": level, "frac": frac}


def suite_chinchilla(draws: int, seeds: int, log) -> dict:
    st = _chinchilla_setup()
    traces, _ = run_suite(st["pool"], st["start"], 12, st["max_acquire"], st["target"], st["y_true"], st["target_q"], "chinchilla",
                          ["N", "D"], seeds, draws, log, "chinchilla")
    return {"traces": traces, "goal": _goal(traces, 12), "pool": len(st["pool"]), "targets": len(st["target"]),
            "start": len(st["start"]), "acquire": 12, "max_acquire": st["max_acquire"], "law": "chinchilla", "cost": "6ND",
            "residuals": _residual_check(draws)}


# --------------------------------------------------------------------------------------------------
# Simulated worlds: the Chinchilla design, losses from a known law, error against the true curve

SIM_LAW = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}   # Hoffmann et al. 2022
SIM_NOISE = 0.01
SIM_OURS = ("ours", "ours_plan")


def _sim_setup(world: int) -> dict:
    """World ``world``: the real Chinchilla (N, D) design, y = the law x lognormal 1% noise (seed = world). The
    targets' true values are the noise-free law: the error is that of the predicted loss curve, which no run's
    noise can blur, so error levels below the noise of one run are meaningful."""
    import bayescale as bs

    runs = bs.datasets.chinchilla().rename(columns={"loss": "y"})
    runs["cost"] = runs["C"]
    p = SIM_LAW
    mean = p["E"] + p["A"] / runs["N"] ** p["alpha"] + p["B"] / runs["D"] ** p["beta"]
    runs["y"] = mean * np.exp(np.random.default_rng(world).normal(0, SIM_NOISE, len(runs)))
    runs["truth"] = mean
    pool = runs[runs["C"] < 1e21].reset_index(drop=True)
    target = runs[runs["C"] >= 1e21].reset_index(drop=True)
    return dict(pool=pool, start=list(pool["cost"].nsmallest(8).index), n_acquire=12, max_acquire=120,
                target=target[["N", "D"]], y_true=target["truth"].to_numpy(), target_q=target[["N", "D"]],
                law="chinchilla", inputs=["N", "D"])


def _sim_replay(st: dict, strategy: str, world: int, draws: int, cap: float | None) -> list[dict]:
    """Baselines: the protocol's 12 acquisitions. Ours (``cap`` given): up to ``max_acquire`` runs while its compute is below
    ``cap`` (the most any baseline spent in this world), so that every strategy's curve reaches as far."""
    pool, start = st["pool"], st["start"]
    grid = np.geomspace(pool.loc[start, "cost"].max(), pool["cost"].max(), st["n_acquire"] + 1)[1:]
    r = Replay(pool, start, st["target"], st["y_true"], st["target_q"], st["law"], st["inputs"], strategy, 100 * world,
               draws, grid)
    while len(r.steps) - 1 < st["n_acquire"] or (cap is not None and r.compute < cap
                                                  and len(r.steps) - 1 < st["max_acquire"]):
        if not r.acquire():
            break
    return r.steps


def suite_sim(draws: int, worlds: int, log, ours=SIM_OURS, first: int = 0) -> dict:
    per_world = []
    for w in range(first, first + worlds):
        st = _sim_setup(w)
        traces = {}
        for strat in (*BASELINES, *ours):
            t0 = time.perf_counter()
            cap = None if strat in BASELINES else max(t[-1]["compute"] for k, t in traces.items() if k in BASELINES)
            traces[strat] = _sim_replay(st, strat, w, draws, cap)
            log(f"sim world {w} {strat}: error {traces[strat][-1]['rmsle']:.4f} at compute "
                f"{traces[strat][-1]['compute']:.3g} after {traces[strat][-1]['n']} runs ({time.perf_counter() - t0:.0f} s)")
        per_world.append(traces)
    return {"worlds": per_world, "summary": _sim_summary(per_world), "law": "chinchilla", "true_law": SIM_LAW,
            "noise": SIM_NOISE, "start": 8, "acquire": 12, "max_acquire": 120, "cost": "6ND"}


def _starts_setup(k: int, min_tokens_per_param: float = 0.0) -> dict:
    """Start set ``k`` of the real Chinchilla pool: 8 runs drawn (seed k) from its 20 cheapest."""
    st = _chinchilla_setup(min_tokens_per_param)
    cheap = st["pool"]["cost"].nsmallest(20).index.to_numpy()
    st["start"] = sorted(int(i) for i in np.random.default_rng(k).choice(cheap, size=8, replace=False))
    return st


def suite_starts(draws: int, starts: int, log, ours=("ours",), min_tokens_per_param: float = 0.0) -> dict:
    """The real Chinchilla replay from several start sets, pooled like the simulated worlds: one real pool has one
    noise draw and one misspecification, so only the path's luck is averaged out. ``min_tokens_per_param``: the
    pool (every strategy's candidates and the start) restricted to D/N at least that."""
    per_world = []
    for w in range(starts):
        st = _starts_setup(w, min_tokens_per_param)
        traces = {}
        for strat in (*BASELINES, *ours):
            t0 = time.perf_counter()
            cap = None if strat in BASELINES else max(t[-1]["compute"] for k, t in traces.items() if k in BASELINES)
            traces[strat] = _sim_replay(st, strat, w, draws, cap)
            log(f"start set {w} {strat}: RMSLE {traces[strat][-1]['rmsle']:.4f} at compute "
                f"{traces[strat][-1]['compute']:.3g} after {traces[strat][-1]['n']} runs ({time.perf_counter() - t0:.0f} s)")
        per_world.append(traces)
    return {"worlds": per_world, "summary": _sim_summary(per_world), "law": "chinchilla", "start": 8,
            "acquire": 12, "max_acquire": 60, "cost": "6ND", "min_tokens_per_param": min_tokens_per_param,
            "pool": len(st["pool"])}


def _held(steps: list[dict], cgrid: np.ndarray, key: str = "rmsle") -> np.ndarray:
    """``key`` after the last acquisition within each compute of ``cgrid`` (held after the last one)."""
    comp = np.array([s["compute"] for s in steps])
    val = np.array([s[key] for s in steps])
    i = np.searchsorted(comp, cgrid * (1 + 1e-12), side="right") - 1
    return np.where(i >= 0, val[np.clip(i, 0, None)], np.nan)


def _sim_summary(worlds: list[dict], n_acquire: int = 12) -> dict:
    """Error pooled over the worlds (root mean square of the worlds' RMSLE) against compute; compute to reach the
    threshold (the best baseline's pooled error after the protocol's acquisitions) and looser levels on those
    pooled curves; per world, how often ours needs <= half the best baseline's compute. The same for the posterior
    sd of the target, with its calibration (mean z^2 of the true curve, ~1 when the bands are honest)."""
    strats = [s for s in worlds[0] if all(s in w for w in worlds)]
    comps = [s["compute"] for w in worlds for t in w.values() for s in t]
    cgrid = np.geomspace(min(comps), max(comps), 600)

    def rms(v, axis=None):
        return np.sqrt(np.nanmean(np.square(v), axis=axis))

    curve = {s: rms([_held(w[s], cgrid) for w in worlds], axis=0) for s in strats}
    sd_curve = {s: rms([_held(w[s], cgrid, "sd") for w in worlds], axis=0) for s in strats}
    at_n = {s: float(rms([w[s][min(n_acquire, len(w[s]) - 1)]["rmsle"] for w in worlds])) for s in strats}
    comp_n = {s: float(np.mean([w[s][min(n_acquire, len(w[s]) - 1)]["compute"] for w in worlds])) for s in strats}
    base = {s: v for s, v in at_n.items() if s not in OURS}
    thr_from = min(base, key=base.get)
    start = float(rms([w[strats[0]][0]["rmsle"] for w in worlds]))
    levels = {"threshold": base[thr_from], **{f"{f:g}": f * start for f in LEVELS}}
    ours = [s for s in strats if s in OURS]

    def first_at(c, lev):
        hit = c <= lev * (1 + 1e-12)
        return float(cgrid[np.argmax(hit)]) if hit.any() else float("inf")

    def stays_at(c, lev):   # from where on the pooled curve stays at or below the level (to the end of the grid)
        above = np.flatnonzero(~(c <= lev * (1 + 1e-12)))
        if not len(above):
            return float(cgrid[0])
        return float(cgrid[above[-1] + 1]) if above[-1] + 1 < len(cgrid) else float("inf")

    out = {}
    for name, lev in levels.items():
        hit = {s: first_at(curve[s], lev) for s in strats}
        best = min((v, k) for k, v in hit.items() if k not in OURS)
        stay = {s: stays_at(curve[s], lev) for s in strats}
        best_stay = min((v, k) for k, v in stay.items() if k not in OURS)
        ratio = {o: (hit[o] / best[0] if np.isfinite(best[0]) else float("nan")) for o in ours}
        per_world = {o: [] for o in ours}
        for w in worlds:
            r_ = {s: compute_to_reach(w[s], lev) for s in strats}
            b_ = min(v for k, v in r_.items() if k not in OURS)
            for o in ours:
                per_world[o].append(r_[o] / b_ if np.isfinite(b_) else float("nan"))
        out[name] = {"rmsle": lev, "compute_to_reach": hit, "best_baseline": best[1], "ratio": ratio,
                     "compute_to_stay": stay, "best_baseline_stay": best_stay[1],
                     "ratio_stay": {o: (stay[o] / best_stay[0] if np.isfinite(best_stay[0]) else float("nan"))
                                    for o in ours},
                     "met": {o: bool(ratio[o] <= 0.5) for o in ours}, "per_world_ratio": per_world,
                     "per_world_met": {o: int(sum(r <= 0.5 for r in v)) for o, v in per_world.items()}}
    sd_base = {s: float(rms([w[s][min(n_acquire, len(w[s]) - 1)]["sd"] for w in worlds])) for s in strats}
    sd_levels = {}
    for name, lev in (("threshold", min(v for k, v in sd_base.items() if k not in OURS)),
                      *((f"{f:g}", f * float(rms([w[strats[0]][0]["sd"] for w in worlds]))) for f in LEVELS)):
        hit = {s: first_at(sd_curve[s], lev) for s in strats}
        best = min((v, k) for k, v in hit.items() if k not in OURS)
        sd_levels[name] = {"sd": lev, "compute_to_reach": hit, "best_baseline": best[1],
                           "ratio": {o: (hit[o] / best[0] if np.isfinite(best[0]) else float("nan")) for o in ours}}
    z2 = {s: float(np.mean([st["z2"] for w in worlds for st in w[s][1:]])) for s in strats}
    return {"worlds": len(worlds), "error_after_n": at_n, "compute_after_n": comp_n, "start_error": start,
            "threshold_from": thr_from, "levels": out, "sd_after_n": sd_base, "sd_levels": sd_levels, "z2": z2,
            "final": {s: float(rms([w[s][-1]["rmsle"] for w in worlds])) for s in strats},
            "runs_at_end": {s: float(np.mean([w[s][-1]["n"] for w in worlds])) for s in strats},
            "curve_grid": cgrid.tolist(), "curves": {s: v.tolist() for s, v in curve.items()},
            "sd_curves": {s: v.tolist() for s, v in sd_curve.items()}}


def suite_ic(draws: int, seeds: int, n_curves: int, log) -> dict:
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
        tq = pd.DataFrame({"x": np.quantile(target["x"], np.linspace(0, 1, 16))})
        start = list(range(4))
        traces, _ = run_suite(pool, start, 5, 12, target[["x"]], target["y"].to_numpy(), tq, "M2", ["x"], seeds,
                              draws, lambda m: None, c)
        g = _goal(traces, 5)
        per_curve[c] = {"traces": traces, "goal": g, "pool": len(pool), "targets": len(target),
                        "pool_max_cost": float(pool["cost"].max())}
        log(f"ic {c}: threshold {g['threshold_rmsle']:.4f}; compute to reach: "
            + ", ".join(f"{k} {v:.3g}" for k, v in g["compute_to_reach"].items()) + f"; met {g['met']}")
    return {"curves": per_curve, "law": "M2", "cost": "x", "start": 4, "acquire": 5, "max_acquire": 12,
            "summary": _ic_summary(per_curve)}


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
    for ax, name in zip(axes.ravel(), suites):
        r = result["suites"][name.replace("_sd", "")]
        if name == "sim_sd":
            sm = r["summary"]
            for strat, cv in sm["sd_curves"].items():
                ax.step(sm["curve_grid"], cv, where="post", color=colors[strat], lw=2 if strat in OURS else 1,
                        ls=":" if strat.endswith("+local") else "-", label=f"{strat} (mean z^2 {sm['z2'][strat]:.2f})")
            ax.set_title("Same worlds: posterior sd of the log target (what the acquisition narrows)", fontsize=9)
            ax.set_xlabel("compute spent on pilot runs (FLOP)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_ylabel("posterior sd of log loss at the targets (rms over worlds)")
            ax.legend(fontsize=7)
            continue
        if name in ("sim", "starts", "starts_dn1"):
            sm = r["summary"]
            for strat, cv in sm["curves"].items():
                ax.step(sm["curve_grid"], cv, where="post", color=colors[strat], lw=2 if strat in OURS else 1,
                        ls=":" if strat.endswith("+local") else "-", label=strat)
            ax.axhline(sm["levels"]["threshold"]["rmsle"], color="k", ls=":", lw=1,
                       label="threshold (best baseline after 12)")
            ax.set_title(f"Chinchilla design, simulated ({sm['worlds']} worlds): error vs the true curve (rms)"
                         if name == "sim" else f"Chinchilla (real{', D/N >= 1' if name.endswith('dn1') else ''}) from "
                         f"{sm['worlds']} start sets: RMSLE (rms)",
                         fontsize=9)
            ax.set_xlabel("compute spent on pilot runs (FLOP)")
        elif name == "chinchilla":
            for strat, trs in r["traces"].items():
                for j, tr in enumerate(trs):
                    ax.plot([s["compute"] for s in tr], [s["rmsle"] for s in tr], marker="o", ms=3, color=colors[strat],
                            ls="--" if strat == "ours_goal" else ":" if strat.endswith("+local") else "-",
                            alpha=1 if strat != "random" else 0.5, lw=2 if strat in OURS else 1,
                            label=strat if j == 0 else None)
            ax.axhline(r["goal"]["threshold_rmsle"], color="k", ls=":", lw=1, label="threshold (best baseline, end)")
            ax.set_title("Chinchilla (real)" + f": start {r['start']} cheapest, +{r['acquire']}; target {r['targets']} runs >= 1e21 FLOP",
                         fontsize=9)
            ax.set_xlabel("compute spent on pilot runs (FLOP)")
        else:
            # median over curves of the error after each acquisition, against median compute / pool max
            for strat in [o for o in OURS if o in next(iter(r["curves"].values()))["traces"]] + list(BASELINES):
                comp, err = [], []
                for c in r["curves"].values():
                    tr = c["traces"][strat][0]
                    comp.append([s["compute"] / c["pool_max_cost"] for s in tr])
                    err.append([s["rmsle"] for s in tr])
                n = min(map(len, comp))
                ax.plot(np.median([x[:n] for x in comp], axis=0), np.median([e[:n] for e in err], axis=0), marker="o",
                        ms=3, color=colors[strat], lw=2 if strat in OURS else 1, label=strat,
                        ls="--" if strat == "ours_goal" else "-")
            s = r["summary"]
            ax.set_title(f"IC curves ({s['curves']}), M2: 4 smallest x, +5; median over curves", fontsize=9)
            ax.set_xlabel("compute spent / largest pool run (sum of x)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylabel("RMSLE at the held-out targets")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def feasibility(n_designs: int, draws: int, seed: int = 0, log=print) -> dict:
    """How reachable the real Chinchilla threshold is for *any* choice of runs: random designs (the 8-run start plus
    pool runs in random order while the total stays under a log-uniform budget up to the best baseline's compute to
    reach the threshold), each fitted like the replay's fits and scored at the targets."""
    st = _chinchilla_setup()
    pool, start = st["pool"], st["start"]
    rng = np.random.default_rng(seed)
    base = float(pool.loc[start, "cost"].sum())
    rows = []
    t0 = time.perf_counter()
    for i in range(n_designs):
        cap = float(np.exp(rng.uniform(np.log(2 * base), np.log(2.67e21))))
        chosen, total = list(start), base
        for j in rng.permutation([k for k in pool.index if k not in start]):
            if total + pool.loc[j, "cost"] <= cap:
                chosen.append(int(j))
                total += float(pool.loc[j, "cost"])
        fit = _fit(pool.loc[chosen], "chinchilla", {"N": "N", "D": "D"}, draws, seed + i)
        err, lpd, sd, _ = _score(fit, st["target"], st["y_true"], seed)
        rows.append({"compute": total, "runs": len(chosen), "rmsle": err, "lpd": lpd, "sd": sd})
        if (i + 1) % 50 == 0:
            log(f"feasibility: {i + 1} designs ({time.perf_counter() - t0:.0f} s)")
    return {"designs": rows, "seed": seed, "draws": draws}


def _feasibility_note(suite: dict) -> str:
    fz = suite.get("feasibility")
    if not fz:
        return ""
    g = suite["goal"]
    thr, reach = g["threshold_rmsle"], g["compute_to_reach"][g["best_baseline"]]
    d = pd.DataFrame(fz["designs"])
    half = d[d["compute"] <= 0.5 * reach]
    rest = d[d["compute"] > 0.5 * reach]
    q = half["rmsle"].quantile([0.05, 0.5]) if len(half) else pd.Series([np.nan, np.nan])
    return (f"Is the threshold reachable at half the compute by any choice of runs? {len(d)} random designs (the start "
            f"plus pool runs in random order under a log-uniform budget; `python -m benchmarks.active_learning "
            f"--feasibility {len(d)}`): of the {len(half)} that spend at most half of {g['best_baseline']}'s "
            f"{reach:.3g} FLOP, {int((half['rmsle'] <= thr).sum())} reach RMSLE {thr:.4f} (5th percentile "
            f"{q.iloc[0]:.4f}, median {q.iloc[1]:.4f}); of the {len(rest)} that spend more, "
            f"{int((rest['rmsle'] <= thr).sum())} do.")


def _residual_check(draws: int = 300) -> dict:
    """Fit chinchilla to the whole real pool: how well it fits runs with D/N < 1 against the rest."""
    import bayescale as bs

    runs = bs.datasets.chinchilla()
    pool = runs[runs["C"] < 1e21].reset_index(drop=True)
    fit = _fit(pool.rename(columns={"loss": "y"}), "chinchilla", {"N": "N", "D": "D"}, draws, 0)
    res = np.abs(np.log(pool["loss"].to_numpy() / fit.predict(pool[["N", "D"]])["curve_median"].values))
    low = (pool["D"] / pool["N"] < 1).to_numpy()
    return {"n_low": int(low.sum()), "median_abs_log_resid_low": float(np.median(res[low])),
            "median_abs_log_resid_rest": float(np.median(res[~low])), "max_low": float(res[low].max()),
            "max_rest": float(res[~low].max())}


def _picks_note(suite: dict) -> str:
    """Which runs each strategy bought in the Chinchilla pool: how many are over-parametrised (D/N < 1) runs."""
    import bayescale as bs

    runs = bs.datasets.chinchilla()
    pool = runs[runs["C"] < 1e21].reset_index(drop=True)
    parts = []
    for strat, trs in suite["traces"].items():
        picks = [st["last"] for st in trs[0][1:]]
        if not picks:
            continue
        sel = pool.loc[picks]
        parts.append(f"{strat} {int((sel['D'] / sel['N'] < 1).sum())}/{len(sel)} (median C {sel['C'].median():.2g})")
    rc = suite.get("residuals")
    why = "" if not rc else (
        f" Fitted to the whole pool, the law misses the {rc['n_low']} runs with D/N < 1 by a median "
        f"{rc['median_abs_log_resid_low']:.3f} in log loss (max {rc['max_low']:.3f}) against "
        f"{rc['median_abs_log_resid_rest']:.3f} (max {rc['max_rest']:.3f}) for the rest: under the law they look "
        "informative (high leverage on the exponents), in fact they pull the fit away from the large runs.")
    return ("Runs bought with fewer than one token per parameter, first seed: " + ", ".join(parts) + "." + why)


def _markdown(result: dict) -> str:
    lines = ["<!-- decisions:start -->", "## Active learning: which pilot run next (replay on real data)", "",
             "`" + "`, `".join(result.get("runs") or [result["command"]]) + f"` on {result['machine']}, {result['timestamp']}; NUTS 2 chains x ({result['draws']} "
             f"warm-up + {result['draws']} draws) per refit, {result['seeds']} seeds for random; "
             f"{result['elapsed_s']:.0f} s (last run). Raw numbers: `benchmarks/results/active_learning.json`; figure "
             "`benchmarks/results/active_learning.png`.", "",
             "Compute = sum of the costs of every run fitted so far (start included). Threshold = the best baseline's "
             "RMSLE after the protocol's acquisitions; strategies that have not reached it keep acquiring (up to a cap) "
             "while their compute is below the best baseline's compute-to-reach; \"compute to reach\" = compute when "
             "a strategy's RMSLE first falls to the threshold (inf: never, within the cap or that compute). "
             "Goal: ours <= 0.5 x the best baseline's compute.", ""]
    for key, title in (("chinchilla", "Chinchilla (real runs; start 8 cheapest, +12 runs (ours: up to 60), target: "
                                      "the 23 runs >= 1e21 FLOP)"),):
        if key not in result["suites"]:
            continue
        g = result["suites"][key]["goal"]
        lv = g["levels"]
        lines += [f"### {title}", "",
                  "| strategy | RMSLE after 12 runs | log density after 12 | compute after 12 runs | runs at the end | "
                  "RMSLE at the end | compute to reach threshold | "
                  + " | ".join(f"to reach {v['rmsle']:.4f}" for v in lv.values()) + " |",
                  "|---|---|---|---|---|---|---|" + "---|" * len(lv)]
        for s, trs in result["suites"][key]["traces"].items():
            comp12 = np.median([t[min(12, len(t) - 1)]["compute"] for t in trs])
            lines.append(f"| {s} | {g['rmsle_after_n'][s]:.4f} | {g['lpd_after_n'][s]:.2f} | {comp12:.3g} | "
                         f"{g['runs_at_end'][s]:.0f} | {g['final_rmsle'][s]:.4f} | {g['compute_to_reach'][s]:.3g} | "
                         + " | ".join(f"{v['compute_to_reach'][s]:.3g}" for v in lv.values()) + " |")
        lines += ["", f"Threshold {g['threshold_rmsle']:.4f} (from {g['threshold_from']}); best baseline to reach it: "
                  f"{g['best_baseline']}; " + "; ".join(
                      f"{o} / best = {r:.3g} -> **{'met' if r <= 0.5 else 'not met'}**" for o, r in g["ratios"].items())
                  + f". Looser levels ({', '.join(lv)} x the starting RMSLE {g['start_rmsle']:.4f}): " + "; ".join(
                      f"{v['rmsle']:.4f} (best baseline {v['best_baseline']}): " + ", ".join(
                          f"{o} {r:.3g}" for o, r in v["ratios"].items()) for v in lv.values()) + ".", ""]
        gl = result["suites"][key].get("goal_level")
        if gl and f"{gl['frac']:g}" in lv:
            v = lv[f"{gl['frac']:g}"]
            lines += [f"ours_goal was told to reach RMSLE {gl['rmsle']:.4f} ({gl['frac']:g} x the starting RMSLE): it got "
                      f"there with {v['compute_to_reach'].get('ours_goal', float('nan')):.3g}, the best baseline "
                      f"({v['best_baseline']}) with {v['compute_to_reach'][v['best_baseline']]:.3g}: ratio "
                      f"{v['ratio_goal']:.3g} -> **{'met' if v['met_goal'] else 'not met'}** at that level.", ""]
        lines += [_picks_note(result["suites"][key]), ""]
        if result["suites"][key].get("feasibility"):
            lines += [_feasibility_note(result["suites"][key]), ""]
    for key in ("starts", "starts_dn1"):
        if key in result["suites"]:
            lines += _sim_markdown(result["suites"][key], real=True)
    if "sim" in result["suites"]:
        lines += _sim_markdown(result["suites"]["sim"])
    if "ic" in result["suites"]:
        r = result["suites"]["ic"]
        s = r["summary"]
        lines += ["### IC curves, NSL-PFN protocol (start 4 smallest x, +5 runs (up to 12), target: held-out split; "
                  "law M2; compute to reach the threshold, in seen examples)", "",
                  ]
        first = next(iter(r["curves"].values()))["traces"]
        variants = [o for o in OURS if o in first]
        cols = [*variants, *BASELINES, *(b for b in first if b.endswith("+local"))]
        lines += ["| curve | threshold | " + " | ".join(cols) + " | " + " | ".join(f"{o} / best" for o in variants)
                  + " |", "|---|---|" + "---|" * (len(cols) + len(variants))]
        for c, v in r["curves"].items():
            g = v["goal"]
            ctr = g["compute_to_reach"]
            lines.append(f"| {c} | {g['threshold_rmsle']:.4f} | " + " | ".join(
                f"{ctr.get(k, float('nan')):.3g}" for k in cols) + " | " + " | ".join(
                f"{g.get('ratios', {}).get(o, float('nan')):.3g}" for o in variants) + " |")
        cv = list(r["curves"].values())
        lines += ["", "Goal (ratio <= 0.5 at the threshold) met on: " + ", ".join(
            f"{o} {sum(v['goal']['ratios'].get(o, np.inf) <= 0.5 for v in cv)}/{len(cv)} curves (median ratio "
            f"{np.median([v['goal']['ratios'].get(o, np.inf) for v in cv]):.3g})" for o in variants)
            + ". Looser levels (fraction of each curve's starting RMSLE): " + "; ".join(
                f"{k}: " + ", ".join(
                    f"{o} met {sum(v['goal']['levels'][k]['ratios'].get(o, np.inf) <= 0.5 for v in cv)}/{len(cv)}, "
                    f"median ratio {np.median([v['goal']['levels'][k]['ratios'].get(o, np.inf) for v in cv]):.3g}"
                    for o in variants) for k in cv[0]["goal"]["levels"]) + ".", ""]
    lines += [result.get("verdict", ""), ""]
    lines += _reading(result)
    shot = OUT / "report_screenshot.png"
    if shot.exists():
        lines += ["### Risk report in a real browser", "",
                  "`python -m benchmarks.active_learning --screenshot` writes a risk report (Chinchilla runs below 1e21 "
                  "FLOP, families chinchilla + kaplan, options 70B/1.4T and 35B/2.8T, target loss 2.0) and renders it in "
                  "headless Chromium: " + result.get("screenshot_check", "") + " Screenshot: "
                  "[`benchmarks/results/report_screenshot.png`](results/report_screenshot.png).", ""]
    lines += ["<!-- decisions:end -->"]
    return "\n".join(lines)


def screenshot(draws: int = 300) -> str:
    import tempfile

    import bayescale as bs
    from bayescale.report import check_in_browser, risk_report

    runs = bs.datasets.chinchilla()
    train = runs[runs["C"] < 1e21]
    folder = tempfile.mkdtemp(prefix="bayescale_report_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = risk_report(train, "chinchilla", laws=["chinchilla", "kaplan"], inputs={"N": "N", "D": "D"}, y="loss",
                          options=["70B,1.4T", "35B,2.8T"], target_loss=2.0, out=folder, chains=2, warmup=draws,
                          samples=draws, seed=0)
    chk = check_in_browser(rep.files["html"], OUT / "report_screenshot.png")
    return (f"{chk['images_ok']}/{chk['images']} images decoded, {chk['script_errors']} script errors, "
            f"{chk['img_tags_with_data']} embedded PNGs in the DOM (fits: 2 chains x ({draws} + {draws})).")


def _add_strategy(result: dict, add: str, only: set, draws: int, path) -> None:
    """Replay one more strategy in the saved suites named in ``only`` (baselines: the protocol's acquisitions; ours:
    on while below the baselines' compute, as in the suite), saving after each replay."""
    t0 = time.perf_counter()
    if "chinchilla" in result["suites"] and "chinchilla" in only:
        steps = rerun_strategy(result["suites"]["chinchilla"]["traces"], _chinchilla_setup(), add, draws)
        result["suites"]["chinchilla"]["traces"][add] = [steps]
        print(f"chinchilla {add}: RMSLE {steps[-1]['rmsle']:.4f} at {steps[-1]['compute']:.3g} after "
              f"{steps[-1]['n']} runs ({time.perf_counter() - t0:.0f} s)", flush=True)
        path.write_text(json.dumps(result, indent=1, default=float))
    setups = {"sim": _sim_setup, "starts": _starts_setup, "starts_dn1": lambda w: _starts_setup(w, 1.0)}
    for key, setup in setups.items():
        if key not in result["suites"] or key not in only:
            continue
        for w, traces in enumerate(result["suites"][key]["worlds"]):
            cap = None if add not in OURS else max(t[-1]["compute"] for k, t in traces.items() if k in BASELINES)
            traces[add] = _sim_replay(setup(w), add, w, draws, cap)
            print(f"{key} {w} {add}: error {traces[add][-1]['rmsle']:.4f} at {traces[add][-1]['compute']:.3g} after "
                  f"{traces[add][-1]['n']} runs ({time.perf_counter() - t0:.0f} s)", flush=True)
            path.write_text(json.dumps(result, indent=1, default=float))
    if "ic" in result["suites"] and "ic" in only:
        for c, v in result["suites"]["ic"]["curves"].items():
            steps = rerun_strategy(v["traces"], _ic_setup(c), add, draws)
            v["traces"][add] = [steps]
            print(f"ic {c} {add}: RMSLE {steps[-1]['rmsle']:.4f} at {steps[-1]['compute']:.3g}", flush=True)
            path.write_text(json.dumps(result, indent=1, default=float))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suites", default=None, help="suites to run (default chinchilla,ic); with --add, where to replay "
                                                   "(default: every saved suite)")
    ap.add_argument("--curves", type=int, default=8)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3, help="random-strategy seeds")
    ap.add_argument("--worlds", type=int, default=4, help="simulated worlds (noise seeds) of the sim suite")
    ap.add_argument("--more-worlds", type=int, help="only: add this many simulated worlds (the next noise seeds) to the "
                                                     "saved sim suite, then redo the table")
    ap.add_argument("--screenshot", action="store_true",
                    help="only: write a risk report, check it in headless Chromium, save the screenshot, and redo the "
                         "RESULTS.md section from the saved JSON")
    ap.add_argument("--table", action="store_true",
                    help="only: recompute the goals from the saved traces and redo the figure and RESULTS.md section")
    ap.add_argument("--goal-level", type=float,
                    help="only: replay ours_goal told to reach this fraction of the starting RMSLE, in every saved "
                         "suite (replacing its ours_goal traces), then redo the table")
    ap.add_argument("--feasibility", type=int, help="only: fit this many random designs of the real Chinchilla pool "
                                                    "(how reachable the threshold is at half the compute), then redo the table")
    ap.add_argument("--add", help="only: replay these extra strategies (comma-separated, e.g. ours_local,grid+local) "
                                   "in every saved suite (or those --suites names), then redo the table")
    args = ap.parse_args(argv)
    args.suites_given = args.suites is not None
    args.suites = args.suites or "chinchilla,ic"
    if args.add:
        path = OUT / "active_learning.json"
        result = json.loads(path.read_text())
        only = {s_.strip() for s_ in args.suites.split(",")} if args.suites_given else set(result["suites"])
        for add in [a.strip() for a in args.add.split(",") if a.strip()]:
            _add_strategy(result, add, only, args.draws, path)
        result.setdefault("runs", [result["command"]]).append("python -m benchmarks.active_learning " + " ".join(
            __import__("sys").argv[1:] if argv is None else argv))
        path.write_text(json.dumps(result, indent=1, default=float))
        args.table = True
    if args.more_worlds:
        path = OUT / "active_learning.json"
        result = json.loads(path.read_text())
        sim = result["suites"]["sim"]
        ours = tuple(o for o in OURS if o in sim["worlds"][0])
        sim["worlds"] += suite_sim(args.draws, args.more_worlds, print, ours=ours, first=len(sim["worlds"]))["worlds"]
        result.setdefault("runs", [result["command"]]).append("python -m benchmarks.active_learning " + " ".join(
            __import__("sys").argv[1:] if argv is None else argv))
        path.write_text(json.dumps(result, indent=1, default=float))
        args.table = True
    if args.feasibility:
        path = OUT / "active_learning.json"
        result = json.loads(path.read_text())
        result["suites"]["chinchilla"]["feasibility"] = feasibility(args.feasibility, args.draws)
        result.setdefault("runs", [result["command"]]).append("python -m benchmarks.active_learning " + " ".join(
            __import__("sys").argv[1:] if argv is None else argv))
        path.write_text(json.dumps(result, indent=1, default=float))
        args.table = True
    if args.goal_level:
        path = OUT / "active_learning.json"
        result = json.loads(path.read_text())
        for key in ("chinchilla",):
            if key in result["suites"]:
                t0 = time.perf_counter()
                g = rerun_goal(result["suites"][key]["traces"], _chinchilla_setup(), args.goal_level,
                               args.draws)
                result["suites"][key]["traces"]["ours_goal"] = [g["steps"]]
                result["suites"][key]["goal_level"] = {"frac": g["frac"], "rmsle": g["level"]}
                print(f"{key} ours_goal (level {g['level']:.4f}): RMSLE {g['steps'][-1]['rmsle']:.4f} at "
                      f"{g['steps'][-1]['compute']:.3g} ({time.perf_counter() - t0:.0f} s)", flush=True)
        if "ic" in result["suites"]:
            for c, v in result["suites"]["ic"]["curves"].items():
                g = rerun_goal(v["traces"], _ic_setup(c), args.goal_level, args.draws)
                v["traces"]["ours_goal"] = [g["steps"]]
                v["goal_level"] = {"frac": g["frac"], "rmsle": g["level"]}
                print(f"ic {c} ours_goal (level {g['level']:.4f}): RMSLE {g['steps'][-1]['rmsle']:.4f}", flush=True)
        result.setdefault("runs", [result["command"]]).append("python -m benchmarks.active_learning " + " ".join(
            __import__("sys").argv[1:] if argv is None else argv))
        path.write_text(json.dumps(result, indent=1, default=float))
        args.table = True
    if args.table:
        path = OUT / "active_learning.json"
        result = json.loads(path.read_text())
        if "chinchilla" in result["suites"]:
            result["suites"]["chinchilla"]["goal"] = _goal(result["suites"]["chinchilla"]["traces"], 12)
        for key in ("sim", "starts", "starts_dn1"):
            if key in result["suites"]:
                result["suites"][key]["summary"] = _sim_summary(result["suites"][key]["worlds"])
        if "chinchilla" in result["suites"] and "residuals" not in result["suites"]["chinchilla"]:
            result["suites"]["chinchilla"]["residuals"] = _residual_check(result.get("draws", 300))
        if "ic" in result["suites"]:
            ic = result["suites"]["ic"]
            for v in ic["curves"].values():
                v["goal"] = _goal(v["traces"], 5)
            ic["summary"] = _ic_summary(ic["curves"])
        result["verdict"] = _verdict(result)
        path.write_text(json.dumps(result, indent=1, default=float))
        _plot(result, OUT / "active_learning.png")
        update_markdown(RESULTS_MD, _markdown(result), "<!-- decisions:start -->", "<!-- decisions:end -->")
        print(result["verdict"])
        return result
    if args.screenshot:
        path = OUT / "active_learning.json"
        result = json.loads(path.read_text()) if path.exists() else {"suites": {}, "command": "", "machine": "",
                                                                     "timestamp": "", "draws": 0, "seeds": 0, "elapsed_s": 0}
        result["screenshot_check"] = screenshot(args.draws)
        path.write_text(json.dumps(result, indent=1, default=float))
        update_markdown(RESULTS_MD, _markdown(result), "<!-- decisions:start -->", "<!-- decisions:end -->")
        print(result["screenshot_check"])
        return result
    t0 = time.perf_counter()

    def log(msg):
        print(msg, flush=True)

    import sys

    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    result = {"command": "python -m benchmarks.active_learning " + " ".join(sys.argv[1:] if argv is None else argv),
              "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores, shared)",
              "draws": args.draws, "seeds": args.seeds, "suites": {}}
    path = OUT / "active_learning.json"
    if path.exists():  # keep the browser check of an earlier --screenshot run, and suites not run this time
        old = json.loads(path.read_text())
        result["screenshot_check"] = old.get("screenshot_check", "")
        result["suites"] = {k: v for k, v in old.get("suites", {}).items() if k not in suites and k != "chinchilla_sim"}
        result["runs"] = old.get("runs", []) + [result["command"]]
    for name in suites:
        if name == "chinchilla":
            result["suites"]["chinchilla"] = suite_chinchilla(args.draws, args.seeds, log)
        elif name == "sim":
            result["suites"]["sim"] = suite_sim(args.draws, args.worlds, log)
        elif name == "starts":
            result["suites"]["starts"] = suite_starts(args.draws, args.worlds, log)
        elif name == "starts_dn1":
            result["suites"]["starts_dn1"] = suite_starts(args.draws, args.worlds, log, min_tokens_per_param=1.0)
        elif name == "ic":
            result["suites"]["ic"] = suite_ic(args.draws, max(1, args.seeds - 1), args.curves, log)
        else:
            raise SystemExit(f"unknown suite {name!r}")
        result["elapsed_s"] = time.perf_counter() - t0
        path.write_text(json.dumps(result, indent=1, default=float))  # partial results survive an interruption
    result["verdict"] = _verdict(result)
    result["elapsed_s"] = time.perf_counter() - t0
    path.write_text(json.dumps(result, indent=1, default=float))
    _plot(result, OUT / "active_learning.png")
    update_markdown(RESULTS_MD, _markdown(result), "<!-- decisions:start -->", "<!-- decisions:end -->")
    log(result["verdict"])
    return result


def _ic_summary(per_curve: dict) -> dict:
    ratios = np.array([v["goal"]["ratio_ours_to_best"] for v in per_curve.values()])
    rg = np.array([v["goal"].get("ratio_goal_to_best", np.nan) for v in per_curve.values()])
    return {"curves": len(per_curve), "met": int(sum(v["goal"]["met"] for v in per_curve.values())),
            "met_goal": int(sum(v["goal"].get("met_goal", False) for v in per_curve.values())),
            "ours_reached": int(np.isfinite(ratios).sum()),
            "median_ratio": float(np.median(ratios)) if len(ratios) else float("nan"),
            "median_ratio_goal": float(np.median(rg)) if len(rg) else float("nan")}


def _reading(result: dict) -> list[str]:
    """What the tables say, with their numbers."""
    out = []
    if "sim" in result["suites"]:
        sm = result["suites"]["sim"]["summary"]
        lv, sl = sm["levels"], sm["sd_levels"]
        thr = lv["threshold"]
        out.append(
            f"**Reading.** Where the law is right (the simulated worlds), choosing by expected variance reduction per "
            f"unit cost (`ours`) reaches the strict threshold, the pooled error {thr['rmsle']:.4f} that "
            f"{thr['best_baseline']} has after 12 runs ({thr['compute_to_reach'][thr['best_baseline']]:.3g} FLOP), "
            f"with {thr['compute_to_reach'].get('ours', float('nan')):.3g} FLOP ({thr['ratio'].get('ours', float('nan')):.2f}x), "
            f"and error {lv['0.2']['rmsle']:.4f} with {lv['0.2']['ratio'].get('ours', float('nan')):.2f}x the best "
            f"baseline's compute; at the looser levels it is {lv['0.5']['ratio'].get('ours', float('nan')):.2f}x and "
            f"{lv['0.3']['ratio'].get('ours', float('nan')):.2f}x (the grid's first, cheap picks do as well there). "
            "Measured by the posterior sd of the target, which is honest in these worlds (mean z^2 "
            f"{sm['z2'].get('ours', float('nan')):.2f}), it needs " + ", ".join(
                f"{v['ratio'].get('ours', float('nan')):.2f}x" for v in sl.values())
            + " the best baseline's compute at the four sd levels. It gets there with many small runs: "
            f"{sm['runs_at_end'].get('ours', float('nan')):.0f} runs at the end against 20; where each run has a fixed "
            "overhead, put it in the cost (`cost=` a function of the inputs, or a cost column). `ours_plan` "
            "(`next_runs(horizon=...)`, the compute spent so far: whole plans compared, a big run against many small "
            "ones) narrows the sd about as fast as `ours`; at the four error levels it needs " + ", ".join(
                f"{v['ratio'].get('ours_plan', float('nan')):.2f}x" for v in lv.values()) + " (ours: " + ", ".join(
                f"{v['ratio'].get('ours', float('nan')):.2f}x" for v in lv.values()) + "): neither is better at "
            "every level.")
    if "chinchilla" in result["suites"]:
        tr = result["suites"]["chinchilla"]["traces"].get("ours", [[]])[0]
        if tr:
            best = min(tr, key=lambda s_: s_["rmsle"])
            out.append(
                f"On the real Chinchilla runs the goal is not met by any variant: `ours` is best at RMSLE "
                f"{best['rmsle']:.4f} after {best['compute']:.3g} FLOP, then its error grows to {tr[-1]['rmsle']:.4f} "
                f"at {tr[-1]['compute']:.3g} FLOP as it keeps adding small runs. The law is misspecified there "
                "(see the residuals of the D/N < 1 runs above): more small runs pull the fit away from the large "
                "ones, and no selection rule that trusts the law can see that. `ours_cal` calibrates the "
                "extrapolation error on the runs bought so far (leave-future-out, never the targets) so that runs "
                "extending the range toward the targets count more; the runs bought are small, so it found almost none "
                "and did not help. `ours_tau` takes the domain's tau from leave-future-out on the whole pool (the fit "
                "split, never the targets; 0.13 per decade, as in the extrapolation section): it buys the largest pool "
                "run early but also keeps buying small ones, and ends no better.")
        if "starts" in result["suites"]:
            sm = result["suites"]["starts"]["summary"]
            lv = sm["levels"]
            out.append(
                f"From {sm['worlds']} start sets (pooled, so that one path's luck does not decide) the picture holds: "
                f"`ours` ends at RMSLE {sm['final'].get('ours', float('nan')):.4f} after "
                f"{sm['runs_at_end'].get('ours', float('nan')):.0f} runs, the grid at {sm['final']['grid']:.4f} "
                f"after 20; `ours` matches the best baseline only at the loosest level "
                f"({lv['0.5']['ratio'].get('ours', float('nan')):.2f}x). With the law fitted to every run alike, a "
                "log-uniform spread of costs is the better choice on the real runs.")
        if "starts_dn1" in result["suites"]:
            sm = result["suites"]["starts_dn1"]["summary"]
            lv = sm["levels"]
            out.append(
                "Restricted to the law's regime (at least one token per parameter, for every strategy and the start; "
                "the pool's own residuals single out the D/N < 1 runs), `ours` ends at RMSLE "
                f"{sm['final'].get('ours', float('nan')):.4f} (from {result['suites']['starts']['summary']['final']['ours']:.4f} "
                f"on the whole pool) and the grid at {sm['final']['grid']:.4f}; `ours` reaches "
                + (", ".join(f"{v['rmsle']:.4f} with {v['ratio']['ours']:.2f}x the best baseline's compute"
                             for v in lv.values() if np.isfinite(v["ratio"].get("ours", np.inf))) or "no level")
                + " and none of the tighter levels within its compute: the gap narrows, the goal is not met.")
        if "feasibility" in result["suites"].get("chinchilla", {}):
            out.append("The single-path threshold itself is luck: see the random designs above.")
        for key, where in (("starts", "whole pool"), ("starts_dn1", "D/N >= 1")):
            sm = result["suites"].get(key, {}).get("summary")
            if sm and "ours_local" in sm["final"]:
                out.append(_local_reading(sm, where))
    if "ic" in result["suites"]:
        cv = list(result["suites"]["ic"]["curves"].values())
        med = [float(np.median([v["goal"]["levels"][k]["ratios"].get("ours", np.inf) for v in cv]))
               for k in cv[0]["goal"]["levels"]]
        reached = sum(np.isfinite(v["goal"]["ratios"].get("ours", np.inf)) for v in cv)
        out.append(f"On the IC curves ({len(cv)}) the per-cost choice needs " + "/".join(f"{m:.2f}" for m in med)
                   + f"x the best baseline's compute at the looser levels (median over curves) and reaches the "
                   f"strict threshold on {reached} of {len(cv)} curves.")
    return [" ".join(out), ""] if out else []


def _local_reading(sm: dict, where: str) -> str:
    """ours_local against the baselines (with the global and the local fit) in one many-start summary."""
    thr, fin = sm["levels"]["threshold"], sm["final"]
    loc = sorted((fin[k], k) for k in fin if k.endswith("+local"))
    def ratio(v, key, reach):
        r = v[key].get("ours_local", float("nan"))
        if np.isfinite(r) or np.isinf(r):
            return f"{r:.2f}x"
        return "no baseline; ours " + ("does" if np.isfinite(v[reach]["ours_local"]) else "does not")

    lv = "; ".join(f"{k} ({v['rmsle']:.4f}): first {ratio(v, 'ratio', 'compute_to_reach')}, "
                   f"stays {ratio(v, 'ratio_stay', 'compute_to_stay')}" for k, v in sm["levels"].items()
                   if "ratio_stay" in v)
    return (f"With the law fitted locally around the targets ({where}; `ours_local`: `Fit.localize`, tau from "
            "leave-future-out on the pool, never the targets, and candidates carrying the same extra error), ours "
            f"ends at RMSLE {fin['ours_local']:.4f} after {sm['runs_at_end']['ours_local']:.0f} runs (best baseline at "
            f"the end: {min((v, k) for k, v in fin.items() if k not in OURS)[1]} "
            f"{min(v for k, v in fin.items() if k not in OURS):.4f}); it first reaches the threshold "
            f"{thr['rmsle']:.4f} at {thr['compute_to_reach']['ours_local']:.3g} FLOP and stays there from "
            f"{thr['compute_to_stay']['ours_local']:.3g}. The baselines' rules with the same local fit end at "
            + ", ".join(f"{v:.4f} ({k})" for v, k in loc)
            + f". Ours / best baseline, compute to first reach and to stay at each level: {lv}. These are the replay's "
            "short fits; `benchmarks/replay_rescore.py` refits the same run sets carefully (section \"Replay "
            "re-scored\").")


def _error_table(sm: dict, unit: str) -> list[str]:
    """The pooled-error table of a many-world summary and ours / the best baseline at each level."""
    lv = sm["levels"]
    ours = [o for o in OURS if o in sm["curves"]]
    lines = ["| strategy | error after 12 runs | mean compute after 12 | runs at the end | error at the end | "
             + " | ".join(f"to reach {k} ({v['rmsle']:.4f})" for k, v in lv.items()) + " |",
             "|---|---|---|---|---|" + "---|" * len(lv)]
    for s_ in sm["curves"]:
        lines.append(f"| {s_} | {sm['error_after_n'][s_]:.4f} | {sm['compute_after_n'][s_]:.3g} | "
                     f"{sm['runs_at_end'][s_]:.0f} | {sm['final'][s_]:.4f} | "
                     + " | ".join(f"{v['compute_to_reach'][s_]:.3g}" for v in lv.values()) + " |")
    lines += ["", f"Ours / best baseline (compute to reach, pooled curves; goal <= 0.5), and in how many {unit} ours "
              "needed at most half the best baseline's compute: " + "; ".join(
                  f"{k} ({v['rmsle']:.4f}, best {v['best_baseline']}): " + ", ".join(
                      f"{o} {v['ratio'][o]:.3g} ({v['per_world_met'][o]}/{sm['worlds']} {unit})" for o in ours)
                  if np.isfinite(v["compute_to_reach"][v["best_baseline"]]) else
                  f"{k} ({v['rmsle']:.4f}): no baseline reaches it, " + ", ".join(
                      f"{o} {'does' if np.isfinite(v['compute_to_reach'][o]) else 'does not'}" for o in ours)
                  for k, v in lv.items()) + ".", ""]
    if "compute_to_stay" in next(iter(lv.values())):
        lines += ["A first fall to a level credits a pooled curve that dips below it and comes back up, which no user "
                  "can see at the time; *to stay* is the compute from which the pooled error stays at or below the "
                  "level (to the end of every strategy's budget). Ours / best baseline to stay: " + "; ".join(
                      f"{k} ({v['rmsle']:.4f}, best {v['best_baseline_stay']} {v['compute_to_stay'][v['best_baseline_stay']]:.3g}): "
                      + ", ".join(f"{o} {v['compute_to_stay'][o]:.3g} ({v['ratio_stay'][o]:.3g})" for o in ours)
                      for k, v in lv.items()) + ".", ""]
    return lines


def _sim_markdown(r: dict, real: bool = False) -> list[str]:
    sm = r["summary"]
    if real:
        dn = r.get("min_tokens_per_param", 0.0)
        where = "" if not dn else (f", the pool restricted to runs with at least {dn:g} token per parameter "
                                   f"({r['pool']} runs: the law's regime, from the pool's own residuals above)")
        lines = [f"### Chinchilla (real runs) from {sm['worlds']} start sets"
                 + (f", D/N >= {dn:g}" if dn else ""), "",
                 f"The same real replay from {sm['worlds']} start sets (8 runs drawn from the pool's 20 cheapest, seeds "
                 f"0-{sm['worlds'] - 1}; `--suites {'starts_dn1' if dn else 'starts'} --worlds {sm['worlds']}`){where}; "
                 "baselines +12 runs, ours up to 60 "
                 "while below the most any baseline spent from that start. RMSLE at the 23 real target runs, pooled "
                 "over the start sets (root mean square) at each compute, as for the simulated worlds below.", ""]
        return lines + _error_table(sm, "start sets")
    p = r["true_law"]
    lines = [f"### Chinchilla design, simulated losses ({sm['worlds']} worlds)", "",
             f"The real pool's (N, D) and costs, y = {p['E']} + {p['A']}/N^{p['alpha']} + {p['B']}/D^{p['beta']} "
             f"(Hoffmann et al.) x lognormal {r['noise']:.0%} noise, one noise draw per world (seeds 0-{sm['worlds'] - 1}); "
             "start 8 cheapest, baselines +12 runs (random: one seed per world), ours up to 120 runs while below the most any baseline spent in that "
             "world. Error = RMSLE of the predicted median against the *noise-free* law at the 23 target designs "
             "(the error of the predicted loss curve; one run's noise does not set a floor), pooled over the "
             "worlds (root mean square) at each compute (a strategy's error after its last acquisition within that "
             "compute). Threshold = the best baseline's pooled error after 12 runs; compute to reach = where the "
             "pooled curve first falls to a level.", ""]
    lines += _error_table(sm, "worlds")
    sl = sm["sd_levels"]
    lines += ["The same worlds, measured by the posterior sd of the log target (rms over worlds; the uncertainty the "
              "acquisition narrows, honest when the mean z^2 of the true curve is near 1):", "",
              "| strategy | sd after 12 runs | mean z^2 | " + " | ".join(
                  f"to reach sd {k} ({v['sd']:.4f})" for k, v in sl.items()) + " |",
              "|---|---|---|" + "---|" * len(sl)]
    for s_ in sm["sd_curves"]:
        lines.append(f"| {s_} | {sm['sd_after_n'][s_]:.4f} | {sm['z2'][s_]:.2f} | " + " | ".join(
            f"{v['compute_to_reach'][s_]:.3g}" for v in sl.values()) + " |")
    lines += ["", "Ours / best baseline (compute to reach the sd level): " + "; ".join(
        f"{k} (best {v['best_baseline']}): " + ", ".join(f"{o} {r:.3g}" for o, r in v["ratio"].items())
        for k, v in sl.items()) + ".", ""]
    return lines


def _levels_verdict(sm: dict) -> str:
    """Per level: each of ours' compute to first reach it over the best baseline's ("not reached" when ours never
    does; a level no baseline reaches is said so instead of a ratio)."""
    parts = []
    for k, v in sm["levels"].items():
        if not np.isfinite(v["compute_to_reach"][v["best_baseline"]]):
            reached = [o for o in v["ratio"] if np.isfinite(v["compute_to_reach"][o])]
            parts.append(f"{k} {v['rmsle']:.4f}: no baseline reaches it"
                         + (f" ({', '.join(reached)} do{'es' if len(reached) == 1 else ''})" if reached else ""))
            continue
        parts.append(f"{k} {v['rmsle']:.4f}: " + ", ".join(
            f"{o} {r:.3g}x{' (met)' if r <= 0.5 else ''}" if np.isfinite(r) else f"{o} not reached"
            for o, r in v["ratio"].items()) + f" {v['best_baseline']}'s compute")
    return "; ".join(parts)


def _verdict(result: dict) -> str:
    verdict = []
    if "sim" in result["suites"]:
        sm = result["suites"]["sim"]["summary"]
        verdict.append(f"Simulated worlds ({sm['worlds']}): " + _levels_verdict(sm) + ".")
    for key in ("starts", "starts_dn1"):
        if key not in result["suites"]:
            continue
        sm = result["suites"][key]["summary"]
        verdict.append(f"Real Chinchilla{' (D/N >= 1)' if key.endswith('dn1') else ''} from {sm['worlds']} start "
                       "sets: " + _levels_verdict(sm) + ".")
    for key, name in (("chinchilla", "Chinchilla"),):
        if key not in result["suites"]:
            continue
        g = result["suites"][key]["goal"]
        loose = "; ".join(f"{v['rmsle']:.4f}: " + (f"{v['ratio']:.3g}x" if np.isfinite(v["ratio"]) else "not reached")
                          for v in g["levels"].values())
        verdict.append(f"{name}: goal {'met' if any(r <= 0.5 for r in g['ratios'].values()) else 'not met'} at the "
                       f"threshold {g['threshold_rmsle']:.4f} (compute / {g['best_baseline']}'s: " + ", ".join(
                           f"{o} {r:.3g}x" if np.isfinite(r) else f"{o} not reached" for o, r in g["ratios"].items()) + f"; at looser RMSLE levels ours / best "
                       f"baseline = {loose}).")
    if "ic" in result["suites"]:
        s = result["suites"]["ic"]["summary"]
        cv = list(result["suites"]["ic"]["curves"].values())
        verdict.append("IC: goal met on " + ", ".join(
            f"{sum(v['goal']['ratios'].get(o, np.inf) <= 0.5 for v in cv)}/{len(cv)} curves by {o}"
            for o in OURS if o in cv[0]["traces"]) + f" (median ratio of ours {s['median_ratio']:.3g}).")
    return "**Verdict:** " + " ".join(verdict)


if __name__ == "__main__":
    main()
