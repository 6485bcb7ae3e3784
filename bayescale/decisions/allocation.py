"""Compute-optimal allocation: the posterior of N*(C), D*(C) and L*(C), solved per posterior draw.

For a law in model size ``N`` and tokens ``D`` (chinchilla, kaplan, or any registered law with inputs named ``N``
and ``D``), every posterior draw is a loss surface L(N, D). At a compute budget C the best split minimises L under
the cost constraint ``cost(N, D) = C`` (``6 N D`` by default). :func:`compute_optimal` solves that per draw, so the
answer carries the fit's uncertainty (and, for a :class:`~bayescale.ModelAverage`, the uncertainty about the law):

- a law with a closed form (:attr:`bayescale.laws.Law.optimum`, e.g. Chinchilla's
  N* = G (C/6)^(beta/(alpha+beta))) under the default cost uses it, D* = C / (6 N*);
- otherwise a vectorised search over ln N on a wide grid, refined on a fine grid and by parabolic interpolation.

IsoFLOP profiles among the runs (several sizes at one budget) measure the optimum without a law, and a law's form
can miss it (:mod:`bayescale.decisions.isoflop`). Where the runs hold three or more such profiles (``profiles``),
each draw's N* is the law's times the learned discrepancy (a line in log compute with its uncertainty, wider away
from the profiles); otherwise the optimum is the law's, and its interval carries the posterior's uncertainty only.

L* is the curve at the optimum with its extrapolation error (:meth:`bayescale.posterior.PosteriorDraws.curve`):
a calibrated fit is less sure of the loss far beyond its runs. The extrapolation error does not move (N*, D*): a
multiplicative error that grows with the distance from the runs would push the optimum toward or away from them by
construction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayescale.bands import check_levels, summarize_draws
from bayescale.decisions.isoflop import MIN_PROFILES, OptimumDiscrepancy, isoflop_optima
from bayescale.errors import BayescaleError
from bayescale.posterior import Component, PosteriorDraws, posterior_draws
from bayescale.runs import default_cost

__all__ = ["compute_optimal", "default_cost"]

DEFAULT_ALLOC_LEVELS = (0.8, 0.95)


# --------------------------------------------------------------------------------------------------
# The optimiser


def _check_nd(draws: PosteriorDraws) -> None:
    for c in draws.components:
        if set(c.law.input_names) != {"N", "D"}:
            raise BayescaleError(
                f"compute-optimal allocation needs a law in model size N and tokens D; law {c.law.name!r} has inputs "
                f"{list(c.law.input_names)}. Fit 'chinchilla' or 'kaplan' (or register a law with inputs named N and D)."
            )


def _check_budgets(budgets) -> np.ndarray:
    b = np.atleast_1d(np.asarray(budgets, dtype=float))
    if b.ndim != 1 or b.size == 0:
        raise BayescaleError("budgets must be one number or a 1-D list of compute budgets (e.g. [1e22, 1e23])")
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise BayescaleError(f"budgets must be positive finite numbers (FLOP, or your cost's units); got {b.tolist()}")
    return b


def _tokens_for(cost, n, budget):
    """D with cost(N, D) = budget, elementwise (``cost=None``: :func:`default_cost`, linear in D, so
    D = C / cost(N, 1)); ``cost`` must increase with D. Bisection on ln D."""
    if cost is None:
        return budget / default_cost(n, 1.0)
    lo = np.full(np.broadcast_shapes(np.shape(n), np.shape(budget)), -30.0)
    hi = np.full_like(lo, 120.0)
    nb, bb = np.broadcast_to(n, lo.shape), np.broadcast_to(budget, lo.shape)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        over = np.asarray(cost(nb, np.exp(mid)), float) > bb
        hi, lo = np.where(over, mid, hi), np.where(over, lo, mid)
    return np.exp(0.5 * (lo + hi))


def _numeric_optimum(comp: Component, budgets: np.ndarray, cost, span: float = 14.0, step: float = 0.1):
    """Per draw and budget: ln N* minimising L(N, D(N)); returns (N*, D*, at_edge), each (S, B)."""
    S = comp.size
    # coarse grid over ln N, centred at the ln N where N = D under the default cost, +- span (e^14 ~ 1.2e6 either way)
    base = 0.5 * np.log(budgets / default_cost(1.0, 1.0))                # (B,)
    grid = np.arange(-span, span + step / 2, step)                       # (G,)
    u = base[:, None] + grid[None, :]                                    # (B, G)
    n = np.exp(u)
    d = _tokens_for(cost, n, budgets[:, None])
    L = comp.mean({"N": n, "D": d})                                      # (S, B, G)
    L = np.where(np.isfinite(L), L, np.inf)
    k = np.argmin(L, axis=-1)                                            # (S, B)
    at_edge = (k == 0) | (k == len(grid) - 1)
    u0 = np.take_along_axis(np.broadcast_to(u, (S,) + u.shape), k[..., None], -1)[..., 0]
    # fine grid +- one coarse step around the best point, then a parabola through the best three
    fine = np.linspace(-step, step, 41)
    uf = u0[..., None] + fine                                            # (S, B, F)
    nf = np.exp(uf)
    df_ = _tokens_for(cost, nf, budgets[None, :, None])
    Lf = comp.mean({"N": nf, "D": df_}, paired=True)                    # (S, B, F)
    Lf = np.where(np.isfinite(Lf), Lf, np.inf)
    j = np.clip(np.argmin(Lf, axis=-1), 1, len(fine) - 2)
    y0, y1, y2 = (np.take_along_axis(Lf, (j + o)[..., None], -1)[..., 0] for o in (-1, 0, 1))
    h = fine[1] - fine[0]
    denom = y0 - 2 * y1 + y2
    shift = np.where(np.abs(denom) > 0, 0.5 * h * (y0 - y2) / np.where(denom == 0, 1, denom), 0.0)
    shift = np.clip(shift, -h, h)
    u_best = np.take_along_axis(uf, j[..., None], -1)[..., 0] + shift
    n_best = np.exp(u_best)
    d_best = _tokens_for(cost, n_best, budgets[None, :])
    return n_best, d_best, at_edge


def _closed_form(comp: Component, budgets: np.ndarray):
    """(N*, D*), each (S, B), from the law's own closed form (:attr:`bayescale.laws.Law.optimum`)."""
    nat = comp.law.natural_params({k: np.asarray(v) for k, v in comp.params.items() if k != "sigma"}, comp.scales)
    n = comp.law.optimum({k: np.asarray(v, float)[:, None] for k, v in nat.items()}, budgets[None, :])
    return n, _tokens_for(None, n, budgets[None, :])


def _law_optimum(draws: PosteriorDraws, budgets: np.ndarray, cost, method: str):
    """The law's optimum per draw: (N*, D*, at_edge), each (S, B), and the methods used."""
    ns, ds, edges, used = [], [], [], set()
    for comp, _ in draws.parts():
        closed = comp.law.optimum is not None and cost is None
        if method == "closed" and not closed:
            raise BayescaleError(f"no closed form for law {comp.law.name!r}"
                                 f"{' with a custom cost' if cost is not None else ''}; use method='numeric' or 'auto'")
        if closed and method != "numeric":
            n, d = _closed_form(comp, budgets)
            e = np.zeros_like(n, bool)
            used.add("closed")
        else:
            n, d, e = _numeric_optimum(comp, budgets, cost)
            used.add("numeric")
        ns.append(n), ds.append(d), edges.append(e)
    return (*(np.concatenate(a, axis=0) for a in (ns, ds, edges)), used)


def _profile_runs(model, profiles):
    """The run table whose isoFLOP profiles check the law's optimum, or None."""
    if profiles is None or (isinstance(profiles, str) and profiles.lower() == "none"):
        return None
    if isinstance(profiles, str):
        if profiles.lower() != "auto":
            raise BayescaleError(f"profiles must be 'auto' (the fit's own runs), None, or a table of runs with "
                                 f"columns N, D and y; got {profiles!r}")
        return getattr(model, "runs", None)
    if not isinstance(profiles, pd.DataFrame):
        raise BayescaleError(f"profiles must be 'auto', None, or a DataFrame of runs (columns N, D, y); got "
                             f"{type(profiles).__name__}")
    return profiles


def compute_optimal(model, budgets, cost=None, *, levels=DEFAULT_ALLOC_LEVELS, max_draws: int | None = 2000,
                    keep_draws: bool = False, method: str = "auto", seed: int = 0, profiles="auto") -> xr.Dataset:
    """Posterior of the compute-optimal model size N*, tokens D* and loss L* at each budget.

    Parameters
    ----------
    model : Fit, ModelAverage or PosteriorDraws
        Laws in N and D.
    budgets : float or list of float
        Compute budgets C (FLOP when ``cost`` is the default 6ND).
    cost : callable, optional
        ``cost(N, D)``, vectorised, increasing in D; None: :func:`default_cost`.
    levels : tuple of float
        Central interval levels.
    max_draws : int or None
        Posterior draws used.
    keep_draws : bool
        Also return the draws.
    method : {"auto", "closed", "numeric"}
        The law's closed form under 6ND where it has one (``auto``), or the numeric search.
    seed : int
        Seeds the extrapolation error's and the optimum discrepancy's draws.
    profiles : "auto", None or DataFrame
        IsoFLOP profiles that check the law's optimum (:mod:`bayescale.decisions.isoflop`): ``"auto"`` finds them
        in the fit's own runs (:attr:`bayescale.Fit.runs`); a DataFrame of runs (columns N, D, y) is searched
        instead; None keeps the law's optimum. With at least :data:`~bayescale.decisions.isoflop.MIN_PROFILES`
        profiles that measure an optimum, each draw's N* is the law's times ``exp`` of a draw of their
        discrepancy, and D* follows from the cost.

    Returns
    -------
    xarray.Dataset
        Dims ``budget`` and ``level``: ``N_opt``, ``D_opt``, ``L_opt`` and ``tokens_per_param`` as ``*_median``,
        ``*_mean``, ``*_lower``/``*_upper``; ``at_edge`` (fraction of draws whose optimum hit the search range,
        numeric method); with profiles, dim ``profile``: ``profile_budget``, ``profile_N_opt`` (the parabola's),
        ``profile_N_law`` (the law's median) and ``profile_used``; with ``keep_draws`` the draws (dims ``draw``,
        ``budget``). ``L_opt`` is the law's mean loss at the optimum with its extrapolation error, without
        run-to-run noise. Attrs: ``extrapolation_tau`` per law and ``optimum`` (the law's, or how the profiles
        corrected it).
    """
    if method not in ("auto", "closed", "numeric"):
        raise BayescaleError(f"method must be 'auto', 'closed' or 'numeric', got {method!r}")
    if cost is not None and not callable(cost):
        raise BayescaleError("cost must be a function cost(N, D) -> compute (vectorised, increasing in D), or None for 6ND")
    budgets = _check_budgets(budgets)
    levels = check_levels(levels)
    runs = _profile_runs(model, profiles)
    draws = posterior_draws(model, max_draws=max_draws, seed=seed)
    _check_nd(draws)
    n, d, e, used = _law_optimum(draws, budgets, cost, method)
    optima = None if runs is None else isoflop_optima(runs, cost)
    note = "the law's (no isoFLOP profiles checked)"
    if optima is not None:
        found = optima["used"].to_numpy(bool)
        k = int(found.sum())
        n_law = (_law_optimum(draws, optima["budget"].to_numpy(float), cost, method)[0] if len(optima)
                 else np.empty((n.shape[0], 0)))  # (S, profiles)
        if k >= MIN_PROFILES:
            disc = OptimumDiscrepancy.learn(optima[found], np.log(n_law[:, found]))
            n = n * np.exp(disc.draws(budgets, n.shape[0], np.random.SeedSequence([seed, 1])))
            d = _tokens_for(cost, n, budgets[None, :])
            note = disc.describe()
        else:
            note = (f"the law's ({k} isoFLOP profile{'s' * (k != 1)} of the runs measure an "
                    f"optimum; {MIN_PROFILES} are needed to check it)")
    z = draws.error_z(seed)
    L = np.concatenate([comp.curve({"N": n[sl], "D": d[sl]}, z[sl], paired=True) for comp, sl in draws.parts()])
    ds_ = xr.Dataset(coords={"budget": budgets, "level": levels})
    for name, arr in (("N_opt", n), ("D_opt", d), ("L_opt", L), ("tokens_per_param", d / n)):
        summarize_draws(ds_, name, arr, levels, "budget")
        if keep_draws:
            ds_[f"{name}_draws"] = (("draw", "budget"), arr)
    ds_["at_edge"] = ("budget", e.mean(axis=0))
    if optima is not None and len(optima):
        ds_["profile_budget"] = ("profile", optima["budget"].to_numpy(float))
        ds_["profile_N_opt"] = ("profile", optima["N_opt"].to_numpy(float))
        ds_["profile_N_law"] = ("profile", np.median(n_law, axis=0))
        ds_["profile_used"] = ("profile", optima["used"].to_numpy(bool))
    ds_.attrs.update(laws=",".join(draws.law_names), source=draws.source, method="+".join(sorted(used)),
                     extrapolation_tau=",".join(f"{k}:{v:g}" for k, v in draws.taus.items()), optimum=note,
                     cost="6ND" if cost is None else getattr(cost, "__name__", "custom"), n_draws=int(n.shape[0]))
    return ds_
