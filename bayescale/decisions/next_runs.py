"""Which pilot run to train next: expected reduction of the target's posterior variance per unit cost.

:func:`next_runs` scores candidate runs (a table or a grid, each with a cost) by how much training them would
narrow what the user wants to know, the *target*:

- the loss at a point (``{"N": 7e10, "D": 1.4e12}``), or at several points (a whole curve: the mean over points);
- the compute-optimal loss at a budget (``{"compute_optimal": 1e24}``, laws in N and D).

The target is measured on the log scale of the law's mean curve (parameter uncertainty; run-to-run noise cannot be
trained away), so its variance is unit free. For a NUTS fit the outcome of a candidate is *fantasised*: an outcome
y is simulated from the posterior predictive, the posterior draws are reweighted by its likelihood (importance
sampling: no refit), and the target's variance under those weights is averaged over ``n_outcomes`` simulated
outcomes: E_y[Var(target | data, y)]. Batches are chosen greedily: each chosen run's fantasised outcome stays in
its simulated world while the next run is scored. The effective sample size of the weights is reported; when it
is small the variance estimate is noisy (more draws help: ``max_draws``). How the search runs (outcomes, draws,
the cost exponent, a goal accuracy, a planning horizon) is a :class:`SearchOptions`.

``method="pfn"`` (one-input run tables, when :mod:`bayescale.pfn` is available) fantasises with the PFN instead:
the candidate with a sampled outcome joins the context and the PFN predicts the target again. Its run table has
no law of its own: :data:`bayescale.pfn.prior.RUN_TABLE` describes its one input, against which candidates, costs
and targets are read.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayescale import calibration, pfn
from bayescale.compare import ModelAverage
from bayescale.decisions.allocation import compute_optimal
from bayescale.errors import BayescaleError
from bayescale.fit import Fit, fit
from bayescale.laws import get_law
from bayescale.pfn.prior import RUN_TABLE
from bayescale.posterior import PosteriorDraws, posterior_draws
from bayescale.runs import default_cost, outside, parse_size, query_points, range_coordinates, read_runs

__all__ = ["SearchOptions", "candidate_grid", "next_runs", "parse_target"]

ESS_WARN = 20.0
MIN_USEFUL = 0.01  # a candidate narrowing the target's variance by less than this share buys nothing measurable


@dataclass(frozen=True)
class SearchOptions:
    """How :func:`next_runs` searches.

    ``n_outcomes``: simulated outcomes per candidate (>= 2; the PFN route uses a quarter, at least 4).
    ``max_draws``: posterior draws reweighted (None: all). ``cost_power``: the score divides by cost**cost_power
    (1: per unit cost; 0: ignore cost; lowering it as a budget is spent is "cost cooling"). ``target_sd`` (goal
    mode, NUTS route): the accuracy you need, as the posterior sd of the log target (0.01 ~ +-1%). ``horizon``
    (NUTS route): the compute you expect to spend on pilot runs from here on (whole plans are compared).
    """

    n_outcomes: int = 32
    max_draws: int | None = 1000
    cost_power: float = 1.0
    target_sd: float | None = None
    horizon: float | None = None

    def __post_init__(self):
        if not self.n_outcomes >= 2:
            raise BayescaleError("n_outcomes must be >= 2 (simulated outcomes per candidate)")
        if self.max_draws is not None and not self.max_draws >= 1:
            raise BayescaleError(f"max_draws must be None (all draws) or >= 1, got {self.max_draws!r}")
        if not (np.isfinite(self.cost_power) and self.cost_power >= 0):
            raise BayescaleError(f"cost_power must be a number >= 0 (1: per unit cost, 0: ignore cost), got "
                                 f"{self.cost_power!r}")
        if self.target_sd is not None and not (np.isfinite(self.target_sd) and self.target_sd > 0):
            raise BayescaleError(f"target_sd must be a positive number (posterior sd of the log target), got "
                                 f"{self.target_sd!r}")
        if self.horizon is not None and not (np.isfinite(self.horizon) and self.horizon > 0):
            raise BayescaleError(f"horizon must be a positive number (compute you expect to spend on pilot runs), "
                                 f"got {self.horizon!r}")


# --------------------------------------------------------------------------------------------------
# Inputs: candidates, costs, target


def candidate_grid(**axes) -> pd.DataFrame:
    """Every combination of the given values, e.g. ``candidate_grid(N=[1e8, 1e9], D=[1e10, 1e11])``."""
    if not axes:
        raise BayescaleError("candidate_grid needs at least one axis, e.g. N=[...], D=[...]")
    names = list(axes)
    rows = list(itertools.product(*[np.atleast_1d(np.asarray(v, float)) for v in axes.values()]))
    return pd.DataFrame(rows, columns=names)


def _candidates(law, candidates, columns: dict) -> pd.DataFrame:
    if isinstance(candidates, dict):
        candidates = candidate_grid(**candidates)
    if not isinstance(candidates, pd.DataFrame):
        raise BayescaleError("candidates must be a DataFrame (one row per run you could train) or a dict of value "
                             "lists (every combination is a candidate)")
    if len(candidates) == 0:
        raise BayescaleError("candidates is empty: give at least one run you could train")
    back = {v: k for k, v in columns.items() if k in law.input_names and v != k}
    frame = candidates.rename(columns=back).reset_index(drop=True)
    missing = [n for n in law.input_names if n not in frame.columns]
    if missing:
        want = [columns.get(n, n) for n in missing]
        raise BayescaleError(f"candidates lack column(s) {want} (input(s) {missing} of law {law.name!r}); its columns "
                             f"are {list(map(str, candidates.columns))}")
    for inp in law.inputs:
        v = pd.to_numeric(frame[inp.name], errors="coerce").to_numpy(float)
        if not np.all(np.isfinite(v)) or (inp.scale == "log" and np.any(v <= 0)):
            raise BayescaleError(f"candidate column {columns.get(inp.name, inp.name)!r} must hold finite"
                                 f"{' positive' if inp.scale == 'log' else ''} numbers")
        frame[inp.name] = v
    return frame


def _costs(law, frame: pd.DataFrame, cost) -> np.ndarray:
    names = law.input_names
    if isinstance(cost, str):
        if cost not in frame.columns:
            raise BayescaleError(f"cost column {cost!r} is not among the candidates' columns {list(frame.columns)}")
        c = pd.to_numeric(frame[cost], errors="coerce").to_numpy(float)
    elif callable(cost):
        c = np.asarray(cost(*[frame[n].to_numpy(float) for n in names]), float) * np.ones(len(frame))
    elif cost is None:
        if "cost" in frame.columns:
            c = pd.to_numeric(frame["cost"], errors="coerce").to_numpy(float)
        elif set(names) == {"N", "D"}:
            c = default_cost(frame["N"], frame["D"])
        elif len(names) == 1:
            c = frame[names[0]].to_numpy(float)
        else:
            raise BayescaleError(f"no default cost for law {law.name!r} (inputs {list(names)}): give cost= (a column "
                                 "name or a function of the inputs) or a 'cost' column in the candidates")
    else:
        raise BayescaleError("cost must be None (6ND, or x for one-input laws), a column name or a function")
    if not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise BayescaleError("candidate costs must be positive finite numbers; check the cost column/function")
    return c


def parse_target(target, law, columns: dict | None = None):
    """Normalise a target to ``("points", DataFrame)`` or ``("compute_optimal", budget)``.

    Parameters
    ----------
    target : dict, DataFrame or str
        A dict of input values (one point or several: a curve), a DataFrame of points, a string
        ``"N=70B,D=1.4T"`` (one point; ``"N=70B,D=1.4T;N=35B,D=2.8T"``: several, see
        :func:`bayescale.runs.query_points`), ``{"compute_optimal": 1e24}`` or ``"compute_optimal=1e24"``.
    law : Law or str
        The law (or its name) whose inputs the target gives.
    columns : dict, optional
        The fitted column names of the inputs (input name -> column), accepted as keys of the target.

    Returns
    -------
    tuple
        ``("points", DataFrame)`` (one column per input) or ``("compute_optimal", budget)``.
    """
    law = get_law(law)
    if target is None:
        raise BayescaleError("give a target: the loss at a point ({'N': 7e10, 'D': 1.4e12}), several points (a curve), "
                             "or {'compute_optimal': budget}")
    if isinstance(target, str) and target.strip().lower().startswith("compute_optimal"):
        try:
            target = {"compute_optimal": parse_size(target.split("=", 1)[1])}
        except (IndexError, ValueError):
            raise BayescaleError(f"could not parse target {target!r}; write compute_optimal=1e24") from None
    if isinstance(target, dict) and "compute_optimal" in target:
        if set(law.input_names) != {"N", "D"}:
            raise BayescaleError(f"target compute_optimal needs a law in N and D; {law.name!r} has {list(law.input_names)}")
        b = float(np.asarray(target["compute_optimal"], float).reshape(-1)[0])
        if not np.isfinite(b) or b <= 0:
            raise BayescaleError(f"the compute_optimal budget must be a positive number, got {target['compute_optimal']!r}")
        return "compute_optimal", b
    try:
        return "points", query_points(law, target, columns)
    except BayescaleError as exc:
        raise BayescaleError(f"bad target: {exc}") from None


def _target_draws(draws: PosteriorDraws, kind: str, spec) -> np.ndarray:
    """(S, Q) log target per draw."""
    if kind == "compute_optimal":
        opt = compute_optimal(draws, [spec], keep_draws=True)
        return np.log(opt["L_opt_draws"].values)
    mu = draws.mean(spec)
    return np.log(np.maximum(mu, 1e-300))


# --------------------------------------------------------------------------------------------------
# Importance-reweighted fantasies


def _weighted_var(logw: np.ndarray, T: np.ndarray):
    """logw (..., S), T (S, Q) centred -> (mean over Q of the weighted variance (...), ESS (...)).

    The variance carries the reliability-weights correction 1 / (1 - sum w^2), so that degenerate weights (few
    effective draws) do not by themselves look like a narrower posterior; it equals the usual S/(S-1) correction
    for equal weights.
    """
    lw = logw - logw.max(axis=-1, keepdims=True)
    w = np.exp(lw)
    w /= w.sum(axis=-1, keepdims=True)
    m1 = w @ T
    m2 = w @ (T * T)
    sw2 = (w * w).sum(axis=-1)
    var = np.maximum(m2 - m1 * m1, 0.0).mean(axis=-1) / np.maximum(1.0 - sw2, 0.5)
    return var, 1.0 / sw2


class _Extrapolation:
    """The extrapolation error of a calibrated fit (:mod:`bayescale.calibration`): the target's log mean carries an
    extra variance tau^2 b^(2 gamma), b = its distance beyond the fitted runs (:func:`bayescale.runs.distance_beyond`, max
    over :func:`bayescale.runs.range_coordinates`; tau^2 the draws' mean, :attr:`bayescale.posterior.Component.tau_rms`), which no outcome narrows, but a run that extends the runs' range toward the target shortens b.
    ``gain(lo, hi)`` is that reduction for every candidate (C,), ``var(lo, hi)`` the term now."""

    def __init__(self, law, tau2: float, scales, cand: pd.DataFrame, targets: pd.DataFrame, gamma: float = 1.0):
        self.tau2, self.gamma = float(tau2), float(gamma)
        self.tc, self.lo, self.hi, self.scale = range_coordinates(law, cand, scales)    # (C, K)
        self.tq = range_coordinates(law, targets, scales)[0]                            # (Q, K)

    def _b2(self, lo, hi):  # lo/hi (..., I) -> squared distance of every target (..., Q)
        d = [outside(self.tq[:, i], lo[..., None, i], hi[..., None, i], sc) for i, sc in enumerate(self.scale)]
        return np.max(np.stack(d, axis=-1), axis=-1) ** (2 * self.gamma)

    def var(self, lo, hi) -> float:
        return self.tau2 * float(self._b2(lo, hi).mean())

    def gain(self, lo, hi) -> np.ndarray:
        new = self._b2(np.minimum(lo, self.tc), np.maximum(hi, self.tc))              # (C, Q)
        return self.tau2 * (self._b2(lo, hi)[None, :] - new).mean(axis=-1)

    def extend(self, lo, hi, c: int):
        return np.minimum(lo, self.tc[c]), np.maximum(hi, self.tc[c])


def _greedy(draws, mu, T, costs, steps, budget, search: SearchOptions, seed, first_pick=None, plan=False,
            extrap: _Extrapolation | None = None, extra=None):
    """Greedy picks on fantasised outcomes: ``steps`` runs within ``budget``, each the best by expected variance
    reduction per cost**cost_power (``first_pick`` forces the first; goal mode with ``search.target_sd``). Returns the picks, their expected
    incremental reductions (their sum is the plan's expected reduction), the ESS of each pick's weights and the
    first step's table (every candidate's expected variance after, its Monte Carlo error and ESS). A ``plan``
    stops when no candidate's expected reduction exceeds its Monte Carlo error. With ``extrap`` the variance
    includes the extrapolation error and a run's reduction its shortening of the distance beyond the runs."""
    rng = np.random.default_rng(seed)
    if extrap is not None:
        lo, hi = extrap.lo, extrap.hi
    J, cost_power, target_sd = int(search.n_outcomes), float(search.cost_power), search.target_sd
    S = T.shape[0]
    logw = np.zeros((J, S))                                         # each simulated world's weights
    chosen, gains, ess_rows = [], [], []
    first = None
    remaining = np.inf if budget is None else float(budget)
    for step in range(steps):
        # fantasised outcome of every candidate in every world: a draw picked by the world's weights, plus noise
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        src = np.array([rng.choice(S, p=w[j]) for j in range(J)])   # (J,)
        y = draws.observe(mu[src], rng, idx=src, extra=extra)       # (J, C): draw src[j]'s run at every candidate
        ll = np.stack([draws.logpdf(y[j][None, :], mu, extra=extra) for j in range(J)])  # (J, S, C)
        lw_new = logw[:, None, :] + np.moveaxis(ll, 2, 1)           # (J, C, S)
        var, ess = _weighted_var(lw_new, T)                         # (J, C)
        cur, _ = _weighted_var(logw, T)                             # (J,)
        per_world = cur[:, None] - var                              # (J, C): gain in each simulated world
        if extrap is not None:                                      # deterministic: the same in every world
            cur = cur + extrap.var(lo, hi)
            per_world = per_world + extrap.gain(lo, hi)[None, :]
        gain = per_world.mean(axis=0)
        se = per_world.std(axis=0, ddof=1) / np.sqrt(J)             # Monte Carlo error of the expected gain
        if first is None:
            first = {"var_after": cur.mean() - gain, "gain": gain, "gain_se": se,
                     "ess_median": np.median(ess, axis=0), "ess_min": ess.min(axis=0)}
        score = np.maximum(gain - se, 0.0) / costs**cost_power      # conservative: gains within MC noise count 0
        ok = np.isfinite(score) & (costs <= remaining)
        ok[chosen] = False
        if not ok.any():
            break
        cand_ok = np.flatnonzero(ok)
        best = int(cand_ok[np.lexsort((-gain[cand_ok] / costs[cand_ok] ** cost_power, -score[cand_ok]))[0]])
        if target_sd is not None:
            # goal mode: the cheapest run expected to bring the target's sd to target_sd (within MC error) wins
            enough = cand_ok[(cur.mean() - gain[cand_ok] + se[cand_ok]) <= target_sd**2]
            if len(enough):
                best = int(enough[np.lexsort((-gain[enough], costs[enough]))[0]])
        if step == 0 and first_pick is not None and ok[first_pick]:
            best = int(first_pick)
        elif plan and score[best] <= 0:
            break
        chosen.append(best)
        gains.append(float(gain[best]))
        ess_rows.append(float(np.median(ess[:, best])))
        remaining -= costs[best]
        logw = logw + ll[:, :, best]
        if extrap is not None:
            lo, hi = extrap.extend(lo, hi, best)
    return chosen, gains, ess_rows, first


PLAN_STEPS = 12   # longest plan compared under a horizon


def _shortlist(gain, se, costs, within):
    """First picks worth planning from: the candidate with the largest conservative gain in each decade of cost."""
    idx = np.flatnonzero(within & np.isfinite(gain))
    if not len(idx):
        return []
    dec = np.floor(np.log10(costs[idx]))
    val = gain[idx] - se[idx]
    return sorted({int(idx[dec == d][np.argmax(val[dec == d])]) for d in np.unique(dec)})


def _score_nuts(draws, cand, T, costs, k, budget, search: SearchOptions, seed, extrap=None, extra=None):
    T = T - T.mean(axis=0)
    mu = draws.mean(cand)                                           # (S, C)
    var0 = float(T.var(axis=0).mean()) + (0.0 if extrap is None else extrap.var(extrap.lo, extrap.hi))
    chosen, gains, ess_rows, first = _greedy(draws, mu, T, costs, k, budget, search, seed, extrap=extrap, extra=extra)
    plans = None
    horizon = search.horizon
    if horizon is not None:
        # non-myopic: plans that spend the horizon, each starting from one shortlisted run and going on greedily per
        # unit cost; the plan that narrows the target most wins and its first k runs are the batch
        cap = float(horizon) if budget is None else min(float(horizon), float(budget))
        steps = max(int(k), PLAN_STEPS)
        plans = []
        for f0 in [None, *_shortlist(first["gain"], first["gain_se"], costs, costs <= cap)]:
            c_, g_, e_, _ = _greedy(draws, mu, T, costs, steps, cap, search, seed, f0, True, extrap, extra)
            if c_ and all(c_ != p_["runs"] for p_ in plans):
                plans.append({"first": c_[0], "runs": c_, "gains": g_, "ess": e_, "reduction": float(sum(g_)),
                              "cost": float(costs[c_].sum())})
        if plans:
            best = max(plans, key=lambda p: (p["reduction"], -p["cost"]))
            chosen, gains, ess_rows = best["runs"][:k], best["gains"][:k], best["ess"][:k]
    pred_sd = np.log(np.maximum(draws.observe(mu, np.random.default_rng(seed)), 1e-300)).std(axis=0)
    return var0, first, chosen, gains, ess_rows, pred_sd, plans


def _score_pfn(runs, x_col, y_col, cand_x, target_x, costs, k, budget, n_outcomes, seed):
    """The PFN route: a candidate's outcome is sampled from the PFN's predictive and added to the context; the
    target's variance (log scale) is read off the PFN's predictive quantiles (no sampling noise), averaged over the
    simulated outcomes. The PFN's update is not an exact Bayesian one, so a "reduction" can come out negative."""
    qs = np.linspace(0.005, 0.995, 100)
    rng = np.random.default_rng(seed)

    def tvar(xc, yc):
        q = np.asarray(pfn.predictive(xc, yc, target_x, seed=seed).quantile(qs), float)
        q = q.reshape(len(qs), -1)
        return float(np.log(np.maximum(q, 1e-300)).var(axis=0).mean())

    x_ctx, y_ctx = runs[x_col].to_numpy(float), runs[y_col].to_numpy(float)
    J = n_outcomes
    worlds = [(x_ctx, y_ctx)] * J
    var0 = tvar(x_ctx, y_ctx)
    base_q = np.asarray(pfn.predictive(x_ctx, y_ctx, cand_x, seed=seed).quantile(qs), float).reshape(len(qs), -1)
    pred_sd = np.log(np.maximum(base_q, 1e-300)).std(axis=0)
    chosen, gains, ess_rows, first = [], [], [], None
    remaining = np.inf if budget is None else float(budget)
    for _ in range(k):
        cur = np.array([tvar(xc, yc) for xc, yc in worlds])                      # (J,)
        var = np.full((J, len(cand_x)), np.nan)
        outs = np.zeros((J, len(cand_x)))
        for j, (xc, yc) in enumerate(worlds):
            s_j = int(rng.integers(2**31))
            ys = np.asarray(pfn.predictive(xc, yc, cand_x, seed=s_j).sample(1, seed=s_j), float).reshape(-1)
            for c, xq in enumerate(cand_x):
                if c in chosen or costs[c] > remaining:
                    continue
                outs[j, c] = ys[c]
                var[j, c] = tvar(np.append(xc, xq), np.append(yc, ys[c]))
        per_world = cur[:, None] - var
        gain = per_world.mean(axis=0)
        se = per_world.std(axis=0, ddof=1) / np.sqrt(J)
        if first is None:
            first = {"var_after": var0 - gain, "gain_se": se, "ess_median": np.full(len(cand_x), np.nan),
                     "ess_min": np.full(len(cand_x), np.nan)}
        score = np.maximum(gain - se, 0.0) / costs
        ok = np.isfinite(gain)
        if not ok.any():
            break
        cand_ok = np.flatnonzero(ok)
        best = int(cand_ok[np.lexsort((-gain[cand_ok] / costs[cand_ok], -score[cand_ok]))[0]])
        chosen.append(best)
        gains.append(float(gain[best]))
        ess_rows.append(float("nan"))
        remaining -= costs[best]
        worlds = [(np.append(xc, cand_x[best]), np.append(yc, outs[j, best])) for j, (xc, yc) in enumerate(worlds)]
    return var0, first, chosen, gains, ess_rows, pred_sd


# --------------------------------------------------------------------------------------------------


def _fits_of(model) -> list:
    return list(model.fits.values()) if isinstance(model, ModelAverage) else [model]


def _run_error(run_error, cand: pd.DataFrame):
    """Candidates' extra error (ln units, (C,)) from a number, one value per candidate or a column name."""
    if run_error is None:
        return None
    if isinstance(run_error, str):
        if run_error not in cand.columns:
            raise BayescaleError(f"run_error column {run_error!r} is not among the candidates' columns "
                                 f"{list(map(str, cand.columns))}")
        run_error = pd.to_numeric(cand[run_error], errors="coerce").to_numpy(float)
    e = np.asarray(run_error, float)
    if e.ndim > 1 or (e.ndim == 1 and len(e) != len(cand)):
        raise BayescaleError(f"run_error must be one number or one per candidate ({len(cand)}), got shape {e.shape}")
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        bad = np.flatnonzero(~(np.isfinite(e) & (e >= 0))) if e.ndim else [0]
        raise BayescaleError(f"run_error must hold finite numbers >= 0 (ln units); candidate row {int(bad[0])} has "
                             f"{np.atleast_1d(e)[bad[0]]!r}")
    return np.broadcast_to(e, (len(cand),)).copy()


def _extrapolation(law, cand, kind, spec, draws: PosteriorDraws) -> _Extrapolation | None:
    """The draws' extrapolation error (for a mixture the draw-weighted mean of the families' tau^2), or None when
    it is 0. ``draws`` themselves must then be error-free: this term replaces the error's draws."""
    tau2 = sum(c.size * c.tau_rms**2 for c in draws.components) / draws.size
    if tau2 <= 0:
        return None
    base = draws.without_error()
    if kind == "compute_optimal":   # the allocation the posterior expects at that budget
        opt = compute_optimal(base, [spec], keep_draws=True)
        targets = pd.DataFrame({"N": [float(np.median(opt["N_opt_draws"].values))],
                                "D": [float(np.median(opt["D_opt_draws"].values))]})
    else:
        targets = spec
    return _Extrapolation(law, tau2, draws.components[0].scales, cand, targets, draws.components[0].gamma)


def _without_existing(cand: pd.DataFrame, runs, law) -> tuple[pd.DataFrame, int]:
    """``cand`` without the runs already trained (every input within 1e-6 relative of a run in ``runs``, law input
    names), and how many were dropped; an error if none is left."""
    names = list(law.input_names)
    if runs is None or not set(names) <= set(getattr(runs, "columns", ())):
        return cand, 0
    c = cand[names].to_numpy(float)[:, None, :]
    r = runs[names].to_numpy(float)[None, :, :]
    have = np.all(np.abs(c - r) <= 1e-6 * np.maximum(np.abs(r), 1e-300), axis=2).any(axis=1)
    if have.all():
        raise BayescaleError(f"every one of the {len(cand)} candidate runs is a run you already have: give runs "
                             "you could still train (e.g. larger models or more tokens)")
    return cand[~have].reset_index(drop=True), int(have.sum())


def next_runs(fit_or_runs, candidates, target=None, *, k: int = 1, budget: float | None = None, cost=None,
              run_error=None, search: SearchOptions = SearchOptions(), seed: int = 0, method: str = "nuts",
              law=None, x=None, inputs=None, y: str = "loss", fit_kwargs: dict | None = None) -> pd.DataFrame:
    """Rank candidate runs by expected reduction of the target's variance per unit cost; pick a batch of ``k``.

    Parameters
    ----------
    fit_or_runs : Fit, ModelAverage, PosteriorDraws or run table
        What is known. A run table is fitted with ``law=``, ``x=``/``inputs=``, ``y=`` and ``fit_kwargs``; with
        ``method="pfn"`` its one-input curve (``x=``, ``y=`` columns) is the PFN's context.
    candidates : DataFrame or dict
        Runs you could train: the inputs' columns (the fitted column names or the law's input names) and
        optionally a ``cost`` column, or a dict of value lists (every combination, :func:`candidate_grid`).
    target : dict, DataFrame or str
        What to learn, see :func:`parse_target`.
    k : int
        Runs to choose (a greedy batch).
    budget : float, optional
        The most the batch may cost in total.
    cost : None, str or callable
        None (the ``cost`` column, else :func:`~bayescale.decisions.allocation.default_cost` for laws in N and D,
        x for one-input laws), a column name, or a function of the inputs.
    run_error : float, array or str, optional
        An extra error of each candidate's outcome as the fit will see it (ln units, in quadrature with the
        noise): a number, one value per candidate or a candidates' column name; for a local fit
        (:meth:`~bayescale.Fit.localize`) it defaults to tau x the candidate's distance in decades from the target.
    search : SearchOptions
        How the search runs: simulated outcomes, posterior draws, ``cost_power``, goal mode (``target_sd``: each
        pick is the cheapest candidate expected to bring the target's sd there, expected variance plus one Monte
        Carlo error, and the best per unit cost when none does) and ``horizon``. Per unit cost alone is myopic
        (the cheapest runs keep the best ratio after what they can tell has saturated); with a horizon, whole
        plans are compared instead: each shortlisted run (the most informative one per decade of cost) followed
        by greedy per-cost picks until the horizon is spent, plus the plain greedy plan, all on the same
        fantasised outcomes; the batch is the first ``k`` runs of the plan expected to narrow the target most
        (cost-benefit greedy with partial enumeration, Krause & Guestrin 2005). Plans are at most 12 runs long.
    seed : int
        Seeds the posterior draws, the fantasised outcomes and (for a run table) the fit.
    method : {"nuts", "pfn"}
        Fantasise by reweighting posterior draws, or with the PFN (one-input run tables; no ``horizon``,
        ``run_error``).

    A fit with a calibrated extrapolation error (``fit.calibrate()``, tau per decade beyond the runs) adds it to
    the target's variance, tau^2 b^2 with b the target's distance beyond the runs in decades, as its bands do; a run
    that extends the runs' range toward the target shortens b, which no outcome of a run inside the range can do.

    Returns
    -------
    DataFrame
        One row per candidate, best first: the inputs, ``cost``, ``target_sd`` (now, log scale),
        ``expected_sd_after`` (if this run alone is added), ``expected_var_reduction``, ``reduction_frac``,
        ``reduction_se`` (its Monte Carlo error), ``score`` (variance reduction less one Monte Carlo error, per
        cost**cost_power: a gain within simulation noise scores 0), ``ess_median``/``ess_min`` (importance
        weights), ``candidate_sd`` (predictive sd of the log outcome there: "most uncertain point"),
        ``run_error`` (the extra error used, when there is one), ``reaches_target_sd`` (goal mode),
        ``plan_reduction``/``plan_cost`` (with a horizon), ``chosen``, ``batch`` (1..k, greedy order) and
        ``batch_gain``. Candidates that are runs already trained are left out (``attrs["already_have"]`` counts
        them). ``attrs`` record the target, the variance before, the settings and any warning.
    """
    if method not in ("nuts", "pfn"):
        raise BayescaleError(f"method must be 'nuts' or 'pfn', got {method!r}")
    if int(k) < 1:
        raise BayescaleError(f"k (runs to choose) must be >= 1, got {k}")
    if budget is not None and not (np.isfinite(budget) and budget > 0):
        raise BayescaleError(f"budget must be a positive number (the most the batch may cost), got {budget!r}")
    if not isinstance(search, SearchOptions):
        raise BayescaleError(f"search must be a SearchOptions, got {type(search).__name__}")

    if method == "pfn" and search.horizon is not None:
        raise BayescaleError("a horizon (SearchOptions(horizon=...): plan comparison) is available with method='nuts' "
                             "only")
    if method == "pfn" and run_error is not None:
        raise BayescaleError("run_error= is available with method='nuts' only")
    plans, tau_used, extra = None, 0.0, None
    if method == "pfn":
        if not pfn.available():
            raise BayescaleError("method='pfn' needs the PFN extrapolator's weights (bayescale.pfn.available() is False)")
        if isinstance(fit_or_runs, (Fit, ModelAverage, PosteriorDraws)):
            raise BayescaleError("method='pfn' takes a run table (one input x and y), not a fit")
        runs = read_runs(fit_or_runs)
        xcol = x if isinstance(x, str) else (inputs or {}).get("x")
        if xcol is None or xcol not in runs or y not in runs:
            raise BayescaleError(f"method='pfn' needs x='<column>' and y='<column>' naming columns of the run table "
                                 f"(columns: {list(runs.columns)})")
        lawobj = RUN_TABLE
        columns = {"x": xcol, "y": y}
        cand, have = _without_existing(_candidates(lawobj, candidates, columns), runs.rename(columns={xcol: "x"}),
                                       lawobj)
        costs = _costs(lawobj, cand, cost)
        kind, spec = parse_target(target, lawobj, columns)
        if kind != "points":
            raise BayescaleError("method='pfn' supports point/curve targets only")
        var0, first, chosen, gains, ess_rows, pred_sd = _score_pfn(
            runs, xcol, y, cand["x"].to_numpy(float), spec["x"].to_numpy(float), costs, int(k), budget,
            max(4, search.n_outcomes // 4), seed)
        n_draws = 0
    else:
        if isinstance(fit_or_runs, (Fit, ModelAverage, PosteriorDraws)):
            model = fit_or_runs
        else:
            if law is None:
                raise BayescaleError("a run table needs law= (and x=/inputs=) to be fitted before choosing runs")
            model = fit(fit_or_runs, law, x=x, inputs=inputs, y=y, seed=seed, **(fit_kwargs or {}))
        draws = posterior_draws(model, max_draws=search.max_draws, seed=seed)
        lawobj = draws.law
        columns = getattr(model, "columns", None) or {}
        cand, have = _without_existing(_candidates(lawobj, candidates, columns), getattr(model, "runs", None),
                                       lawobj)
        costs = _costs(lawobj, cand, cost)
        kind, spec = parse_target(target, lawobj, columns)
        extrap = _extrapolation(lawobj, cand, kind, spec, draws)
        draws = draws.without_error()  # its variance enters through extrap, analytically
        T = _target_draws(draws, kind, spec)
        extra = _run_error(run_error, cand)
        if extra is None and not isinstance(model, PosteriorDraws):
            extra = calibration.local_errors(_fits_of(model), lawobj, cand)
        var0, first, chosen, gains, ess_rows, pred_sd, plans = _score_nuts(
            draws, cand, T, costs, int(k), budget, search, seed, extrap, extra)
        tau_used = 0.0 if extrap is None else float(np.sqrt(extrap.tau2))
        n_draws = draws.size

    out = cand.rename(columns={k_: v for k_, v in columns.items() if k_ in lawobj.input_names}).copy()
    out["cost"] = costs
    out["target_sd"] = np.sqrt(var0)
    out["expected_sd_after"] = np.sqrt(np.maximum(first["var_after"], 0))
    out["expected_var_reduction"] = var0 - first["var_after"]
    out["reduction_frac"] = out["expected_var_reduction"] / var0 if var0 > 0 else 0.0
    out["reduction_se"] = first["gain_se"]
    se0 = np.nan_to_num(first["gain_se"], nan=0.0)
    out["score"] = np.maximum(out["expected_var_reduction"] - se0, 0.0) / out["cost"] ** float(search.cost_power)
    out["ess_median"], out["ess_min"] = first["ess_median"], first["ess_min"]
    out["candidate_sd"] = pred_sd
    if extra is not None:
        out["run_error"] = extra  # (C,), ln units, as the fit will see it
    if search.target_sd is not None:
        out["reaches_target_sd"] = (first["var_after"] + np.nan_to_num(first["gain_se"])) <= search.target_sd**2
    if plans is not None:
        # expected reduction of the whole plan that starts with this run (shortlisted runs only) and its cost
        out["plan_reduction"], out["plan_cost"] = np.nan, np.nan
        for p_ in plans:
            out.loc[p_["first"], ["plan_reduction", "plan_cost"]] = [p_["reduction"], p_["cost"]]
    out["chosen"] = False
    out["batch"] = 0
    out["batch_gain"] = np.nan
    for i, (c, g) in enumerate(zip(chosen, gains), start=1):
        out.loc[c, ["chosen", "batch", "batch_gain"]] = [True, i, g]
    order = np.lexsort((-(out["expected_var_reduction"] / out["cost"]).to_numpy(float), -out["score"].to_numpy(float),
                        np.where(out["chosen"], out["batch"], np.iinfo(int).max)))
    out = out.iloc[order].reset_index(drop=True)
    out.attrs.update(target=kind if kind == "compute_optimal" else f"{len(spec)} point(s)", target_spec=(
        spec if kind == "compute_optimal" else spec.to_dict(orient="list")), var_before=float(var0), method=method,
        n_draws=int(n_draws), n_outcomes=int(search.n_outcomes), seed=seed, budget=budget,
        target_sd=search.target_sd, horizon=search.horizon, extrapolation_tau=tau_used,
        run_error_max=None if extra is None else float(np.max(extra)),
        plans=[{k_: v for k_, v in p_.items() if k_ != "ess"} for p_ in plans or []],
        batch_cost=float(costs[chosen].sum()) if chosen else 0.0, already_have=have)
    low = [e for e in ess_rows if np.isfinite(e) and e < ESS_WARN]
    notes = []
    if method == "nuts" and low:
        notes.append(f"importance weights of the chosen run(s) are degenerate (median ESS {min(low):.1f} < "
                     f"{ESS_WARN:g} of {n_draws} draws): the expected variance after is noisy; raise max_draws or "
                     "refit after adding a run")
    best = float(np.nanmax(out["reduction_frac"])) if len(out) else 0.0
    if best < MIN_USEFUL:
        notes.append(f"no candidate is expected to narrow the target by {MIN_USEFUL:.0%} or more of its variance "
                     f"(best {max(best, 0.0):.1%}): the chosen run buys nothing measurable; offer runs nearer the "
                     "target (larger models, more tokens)")
    if notes:
        out.attrs["warning"] = "; ".join(notes)
        warnings.warn(out.attrs["warning"], UserWarning, stacklevel=2)
    return out
