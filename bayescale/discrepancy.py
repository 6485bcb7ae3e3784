"""Extrapolation discrepancy: the error a law makes beyond its data, calibrated on the user's own runs.

A fitted law is exact only if the curve belongs to the family; real curves bend away from it, and the further a
prediction reaches beyond the runs, the more that matters. NUTS alone cannot see this (inside the data the misfit
is absorbed by the parameters and the noise scale), so bands beyond the data come out too narrow on real curves
(``benchmarks/RESULTS.md``, extrapolation section). bayescale models the misfit as a multiplicative error on the
law's mean curve::

    mu'(x) = mu(x) * exp(delta),    delta ~ Normal(0, (tau * b(x))^2)

with ``b`` the distance beyond the fitted runs in decades (:func:`bayescale.runs.distance_beyond`; 0 inside the
data) and ``tau`` in ln-units per decade. ``tau`` is estimated by leave-future-out on the fitted runs themselves
(never on the points to predict): refit without the largest ``holdout`` share of the runs, predict those, and
maximise the likelihood of their log errors ``r_i ~ Normal(0, s_i^2 + tau^2 b_i^2)``, where ``s_i`` is the
refit's own predictive sd of ``ln y``. :func:`calibrate_many` pools the held-out errors of many curves into one
``tau`` (one domain), which is steadier than one curve's estimate.

*Local fits* (:meth:`bayescale.Fit.localize`) read the same error the other way round: a run ``d`` decades away
from the points to predict (:func:`distance_from`) tells about them only up to ``tau * d``, so each run gets that
extra error (ln units, in quadrature with its noise) and the law is fitted as a local approximation around the
target. Runs far from the target then count little, which matters when the law holds only near it (e.g.
Chinchilla approach 3 on runs with fewer tokens than parameters); :func:`bayescale.next_runs` gives candidate runs
the same extra error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from bayescale.errors import RunTableError
from bayescale.runs import distance_beyond, scales_for

__all__ = ["Calibration", "calibrate", "calibrate_many", "estimate_tau", "distance_from"]


@dataclass
class Calibration:
    """Result of a leave-future-out calibration: ``tau`` (ln-units per decade) and the held-out errors it used."""

    tau: float
    heldout: pd.DataFrame  # one row per held-out run: inputs, y, median, r (ln error), s (pred. sd of ln y), beyond
    refits: dict

    def __repr__(self) -> str:
        return f"<Calibration tau={self.tau:.4g} per decade from {len(self.heldout)} held-out runs>"


def estimate_tau(r, s, b) -> float:
    """Maximum-likelihood ``tau >= 0`` of ``r_i ~ Normal(0, s_i^2 + tau^2 b_i^2)``; 0 when the errors need none."""
    r, s, b = (np.asarray(v, float).reshape(-1) for v in (r, s, b))
    use = np.isfinite(r) & np.isfinite(s) & (b > 0)
    if not use.any():
        return 0.0
    r, s, b = r[use], np.maximum(s[use], 1e-12), b[use]

    def nll(log_tau):
        v = s**2 + np.exp(2 * log_tau) * b**2
        return float(np.sum(0.5 * np.log(v) + 0.5 * r**2 / v))

    res = minimize_scalar(nll, bounds=(np.log(1e-6), np.log(10.0)), method="bounded")
    at_zero = float(np.sum(0.5 * np.log(s**2) + 0.5 * r**2 / s**2))
    return float(np.exp(res.x)) if res.fun < at_zero else 0.0


def _size(fit, frame: pd.DataFrame) -> np.ndarray:
    """Ordering of runs by size: the sum of the log-scale inputs (linear inputs as they are)."""
    tot = np.zeros(len(frame))
    for inp in fit.law.inputs:
        v = frame[inp.name].to_numpy(float)
        tot += np.log(v) if inp.scale == "log" else v
    return tot


def _heldout_errors(fit, holdout: float, toward: str, seed: int | None, refit_kw: dict):
    from bayescale.fit import fit as fit_law

    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be a share in (0, 1), got {holdout}")
    if toward not in ("max", "min"):
        raise ValueError(f"toward must be 'max' (extrapolating to larger runs) or 'min', got {toward!r}")
    runs = fit.runs.reset_index(drop=True)
    size = _size(fit, runs)
    order = np.argsort(size if toward == "max" else -size, kind="stable")
    n_out = max(1, int(round(holdout * len(runs))))
    keep = np.zeros(len(runs), bool)
    keep[order[:len(runs) - n_out]] = True
    kept = runs[keep]
    n_distinct = len(kept.drop_duplicates(subset=list(fit.law.input_names)))
    if n_distinct < fit.law.needs_points:
        raise RunTableError(
            f"calibrating the extrapolation error holds out the largest {n_out} of {len(runs)} runs, leaving "
            f"{n_distinct} distinct points; law {fit.law.name!r} needs {fit.law.needs_points}. Use a smaller holdout or add runs.")
    kw = fit._refit_kwargs(refit_kw)
    sub = fit_law(kept, fit.law, y="y", inputs={n: n for n in fit.law.input_names},
                  se="se" if "se" in kept else None, likelihood=fit.likelihood, df=fit.df,
                  seed=fit.seed + 7919 if seed is None else seed, **kw)
    out = runs[~keep]
    at = {n: out[n].to_numpy(float) for n in fit.law.input_names}
    frame, _, obs = sub.predictive_draws(at, seed=seed, discrepancy=0.0)
    y = out["y"].to_numpy(float)
    if (y <= 0).any() or (obs <= 0).any():
        raise RunTableError("the extrapolation error is calibrated on ln y; it needs positive outcomes and draws "
                            "(use the default lognormal likelihood)")
    lo = np.log(obs)
    table = pd.DataFrame({**at, "y": y, "median": np.exp(np.median(lo, axis=0)), "r": np.log(y) - lo.mean(axis=0),
                          "s": lo.std(axis=0), "beyond": distance_beyond(fit.law, frame, sub.scales)})
    return table, sub


def calibrate(fit, holdout: float = 0.25, toward: str = "max", seed: int | None = None, **refit_kw) -> Calibration:
    """Estimate ``tau`` for one fit by leave-future-out on its runs; the fit itself is not changed.

    ``holdout``: share of the runs (the largest, or with ``toward="min"`` the smallest by their inputs) to refit
    without; extra keywords go to the refit (e.g. fewer ``samples``). Use ``fit.with_discrepancy(cal.tau)``.
    """
    table, sub = _heldout_errors(fit, holdout, toward, seed, refit_kw)
    return Calibration(estimate_tau(table["r"], table["s"], table["beyond"]), table, {fit.group: sub})


def calibrate_many(fits, holdout: float = 0.25, toward: str = "max", seed: int | None = None,
                   **refit_kw) -> Calibration:
    """One ``tau`` for many curves (e.g. a :class:`bayescale.FitMany` of one domain): their held-out errors pooled."""
    tables, subs = [], {}
    for g, f in dict(fits).items():
        t, sub = _heldout_errors(f, holdout, toward, seed, refit_kw)
        tables.append(t.assign(group=g))
        subs[g] = sub
    if not tables:
        raise ValueError("calibrate_many needs at least one fit")
    table = pd.concat(tables, ignore_index=True)
    return Calibration(estimate_tau(table["r"], table["s"], table["beyond"]), table, subs)


def distance_from(law, frame: pd.DataFrame, targets: pd.DataFrame) -> np.ndarray:
    """How far each point of ``frame`` lies from the range of ``targets``: max over inputs, in decades (log inputs)
    or units (linear inputs); 0 inside the targets' range."""
    # the targets' range plays the fitted runs' part in distance_beyond (their y is not needed: a placeholder)
    return distance_beyond(law, frame, scales_for(law, targets.assign(y=1.0)))


def discrepancy_draws(law, frame, scales, tau: float, n_draws: int, key) -> np.ndarray:
    """Draws (S, points) of ``exp(delta)``, ``delta ~ Normal(0, (tau * beyond)^2)``; ones when ``tau`` is 0."""
    if tau < 0 or not np.isfinite(tau):
        raise ValueError(f"discrepancy tau must be a finite number >= 0 (ln-units per decade), got {tau}")
    b = distance_beyond(law, frame, scales)
    if tau == 0 or not (b > 0).any():
        return np.ones((n_draws, len(frame)))
    z = np.random.default_rng(np.asarray(key).astype(np.uint32).tolist()).standard_normal((n_draws, len(frame)))
    return np.exp(tau * b[None, :] * z)

