"""Calibration of the extrapolation error: the error a law makes beyond its data, from the user's own runs.

A fitted law is exact only if the curve belongs to the family; real curves bend away from it, and the further a
prediction reaches beyond the runs, the more that matters. NUTS alone cannot see this (inside the data the misfit is
absorbed by the parameters and the noise scale), so bands beyond the data come out too narrow on real curves
(``benchmarks/RESULTS.md``, extrapolation section). bayescale models the misfit as a multiplicative error on the
law's mean curve, ``mu'(x) = mu(x) exp(delta)``, ``delta ~ Normal(0, (tau b(x))^2)``, with ``b`` the distance beyond
the fitted runs in decades and ``tau`` in ln-units per decade; :mod:`bayescale.posterior` applies it. ``tau`` is
estimated by leave-future-out on the fitted runs themselves (never on the points to predict): refit without the
largest ``holdout`` share of the runs, predict those, and maximise the likelihood of their log errors ``r_i ~
Normal(0, s_i^2 + tau^2 b_i^2)``, where ``s_i`` is the refit's own predictive sd of ``ln y``. :func:`calibrate_many`
pools the held-out errors of many curves into one ``tau`` (one domain), which is steadier than one curve's estimate.
Refits go through a ``refit`` callable (``refit(fit, runs, seed, law) -> fit``, default the fit's own
:meth:`~bayescale.Fit.refit`), as ArviZ's ``SamplingWrapper`` does for LOO/LFO refits, so this module never imports
the fitting code.

*Local fits* (:meth:`bayescale.Fit.localize`) read the same error the other way round: a run ``d`` decades away
from the points to predict (:func:`distance_from`) tells about them only up to ``tau * d``, so each run gets that
extra error (ln units, in quadrature with its noise) and the law is fitted as a local approximation around the
target. Runs far from the target then count little, which matters when the law holds only near it (e.g.
Chinchilla approach 3 on runs with fewer tokens than parameters); :func:`bayescale.next_runs` gives candidate runs
the same extra error.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from bayescale.error_model import heldout_errors
from bayescale.errors import BayescaleError, RunTableError
from bayescale.noise import log_sd
from bayescale.runs import distance_beyond, run_size, scales_for, simpler_law

__all__ = ["Calibration", "calibrate", "calibrate_many", "default_refit", "distance_from", "estimate_tau",
           "local_errors", "localize", "own_errors"]


@dataclass
class Calibration:
    """Result of a leave-future-out calibration: ``tau`` (ln-units per decade), the held-out errors it used and
    how they were made (``method``, per curve for :func:`calibrate_many`): ``"holdout"`` (one refit without the
    largest share of the runs), ``"prequential"`` (too few runs for that: refits without the largest run, the two
    largest, ..., each predicting the run just beyond its data), ``"simpler law NAME"`` (too few runs to refit the
    law itself even once: prequential refits of a registered law with the same inputs and fewer parameters) or
    ``"none"`` (no run can be held out: tau is 0)."""

    tau: float
    heldout: pd.DataFrame  # one row per held-out run: inputs, y, r (ln error), s (pred. sd of ln y), beyond, median
    refits: dict
    method: str | dict = "holdout"

    def __repr__(self) -> str:
        how = self.method if isinstance(self.method, str) else ", ".join(sorted(set(self.method.values())))
        return f"<Calibration tau={self.tau:.4g} per decade from {len(self.heldout)} held-out runs ({how})>"


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


def default_refit(fit, runs: pd.DataFrame, seed: int, law=None):
    """``fit.refit(runs, seed=seed, law=law)``: the same law (or ``law``), noise model and sampler settings on other
    runs."""
    return fit.refit(runs, seed=seed, law=law)


def _refit_errors(law, sub, out: pd.DataFrame, seen: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The errors of refit ``sub`` (fitted to runs ``seen``) at held-out runs ``out``
    (:func:`bayescale.error_model.heldout_errors`), and its draws of the mean curve there (S, len(out))."""
    draws = sub.posterior_draws(600, seed=seed, discrepancy=0.0)  # a mean and an sd: 600 draws are plenty
    mu = draws.mean(out)
    if (mu <= 0).any():
        raise RunTableError(f"the refit of law {law.name!r} predicts outcomes <= 0 at held-out runs; the extrapolation "
                            "error is calibrated on ln y")
    noise_sd = log_sd(sub.likelihood, mu, draws.sigma[:, None], sub.df)
    beyond = distance_beyond(law, out, scales_for(law, seen))
    return heldout_errors(out["y"].to_numpy(float), np.log(mu), noise_sd, beyond), mu


PREQUENTIAL_MAX = 4  # prequential refits at most: the 4 largest runs, each predicted from the runs below it


def _heldout_errors(fit, holdout: float, toward: str, seed: int | None, refit):
    """The held-out errors of one fit's leave-future-out refits: (table, {refit label: refit}, method)."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be a share in (0, 1), got {holdout}")
    if toward not in ("max", "min"):
        raise ValueError(f"toward must be 'max' (extrapolating to larger runs) or 'min', got {toward!r}")
    law = fit.law
    runs = fit.runs.reset_index(drop=True)
    size = run_size(law, runs)
    order = np.argsort(size if toward == "max" else -size, kind="stable")
    n_out = max(1, int(round(holdout * len(runs))))

    def kept(j):  # runs without the j largest
        keep = np.zeros(len(runs), bool)
        keep[order[:len(runs) - j]] = True
        return keep

    def distinct(j):
        return len(runs[kept(j)].drop_duplicates(subset=list(law.input_names)))

    seed = fit.seed + 7919 if seed is None else seed
    if distinct(n_out) >= law.needs_points:
        splits, refit_law, method = [(kept(n_out), ~kept(n_out))], None, "holdout"
    else:
        refit_law = None if distinct(1) >= law.needs_points else simpler_law(law, distinct(1))
        need = (refit_law or law).needs_points
        steps = [j for j in range(1, min(n_out, PREQUENTIAL_MAX) + 1) if distinct(j) >= need and j < len(runs)]
        if not steps:
            return pd.DataFrame(columns=[*law.input_names, "y", "median", "r", "s", "beyond"]), {}, "none"
        # one step ahead: refit without the j largest runs, predict the smallest of them
        splits = [(kept(j), kept(j - 1) & ~kept(j)) for j in steps]
        method = "prequential" if refit_law is None else f"simpler law {refit_law.name}"
    bad = np.flatnonzero(runs["y"].to_numpy(float) <= 0)
    if len(bad):
        raise RunTableError(f"the extrapolation error is calibrated on ln y, so it needs positive outcomes; {len(bad)} "
                            f"run(s) have y <= 0 (rows {bad[:5].tolist()} of the fitted runs)")
    tables, subs = [], {}
    for i, (keep, out_) in enumerate(splits):
        sub = (refit or default_refit)(fit, runs[keep], seed + i, refit_law)
        out = runs[out_]
        errors, mu = _refit_errors(law, sub, out, runs[keep], seed)
        tables.append(pd.concat([out[list(law.input_names) + ["y"]].reset_index(drop=True),
                                 errors.assign(median=np.median(mu, axis=0))], axis=1))
        subs[f"without the {int((~keep).sum())} largest"] = sub
    return pd.concat(tables, ignore_index=True), subs, method


def calibrate(fit, holdout: float = 0.25, toward: str = "max", seed: int | None = None, refit=None) -> Calibration:
    """Estimate ``tau`` for one fit by leave-future-out on its runs; the fit itself is not changed.

    Parameters
    ----------
    fit : Fit
        The fit whose runs are split.
    holdout : float
        Share of the runs (the largest, or with ``toward="min"`` the smallest by their inputs) to refit without.
    toward : {"max", "min"}
        Direction of the extrapolation.
    seed : int, optional
        Seed of the refit and of its predictive draws.
    refit : callable, optional
        ``refit(fit, runs, seed, law) -> fit``: ``fit``'s model refitted to other runs (law input columns, ``y``,
        optional ``se``), with another law when ``law`` is not None; default :func:`default_refit`.

    Returns
    -------
    Calibration
        ``tau`` and the held-out errors; use ``fit.with_discrepancy(cal.tau)``.
    """
    table, subs, method = _heldout_errors(fit, holdout, toward, seed, refit)
    if method == "none":
        warnings.warn(f"no run of the {len(fit.runs)} can be held out to calibrate the extrapolation error of law "
                      f"{fit.law.name!r} (it needs {fit.law.needs_points} distinct points and no simpler law fits "
                      "fewer): tau is 0, so bands beyond the runs carry no extrapolation error", UserWarning,
                      stacklevel=2)
    return Calibration(estimate_tau(table["r"], table["s"], table["beyond"]), table, subs, method)


def calibrate_many(fits, holdout: float = 0.25, toward: str = "max", seed: int | None = None,
                   refit=None) -> Calibration:
    """One ``tau`` for many curves (e.g. a :class:`bayescale.FitMany` of one domain): their held-out errors pooled.

    ``refit`` as for :func:`calibrate`, called with each fit in turn.
    """
    tables, subs, methods = [], {}, {}
    for g, f in dict(fits).items():
        t, sub, methods[g] = _heldout_errors(f, holdout, toward, seed, refit)
        tables.append(t.assign(group=g))
        subs[g] = sub
    if not tables:
        raise ValueError("calibrate_many needs at least one fit")
    table = pd.concat(tables, ignore_index=True)
    return Calibration(estimate_tau(table["r"], table["s"], table["beyond"]), table, subs, methods)


MAX_BLOCKS = 4  # own held-out runs are predicted in at most this many blocks (each a separate bend of the law)


def own_errors(law, runs: pd.DataFrame, refit, holdout: float = 0.25, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """A fit's own leave-future-out errors, by refits: the ``holdout`` share of the runs furthest toward
    ``law.toward`` (at least one; fewer while too few distinct runs would remain) is predicted in up to
    :data:`MAX_BLOCKS` blocks, nearest first, block j by a refit to every run nearer than it (prequential): each
    block is one bend of the law, so more runs give more independent evidence.

    Refits, not importance sampling: the posterior of all the runs has already bent towards the held-out ones, and
    reweighting its draws (PSIS-LFO, used before) does not undo that: on the honest-bands suites its errors were
    far smaller than a refit's, and the error model learned that they said almost nothing about the errors
    further out.

    Parameters
    ----------
    law : Law
    runs : DataFrame
        The fitted runs (law input columns, ``y``, optional ``se``).
    refit : callable
        ``refit(runs, seed) -> fit``: the model refitted to fewer runs (anything with ``posterior_draws``,
        ``likelihood`` and ``df``, e.g. :meth:`bayescale.Fit.refit`), as ArviZ's ``SamplingWrapper`` refits.
    holdout : float
        Share of the runs to hold out at most.
    seed : int
        Seed of the first refit (block j: ``seed + j``).

    Returns
    -------
    (DataFrame, str)
        One row per held-out run: ``r`` (ln y minus the refit's predicted mean of ln y), ``s`` (predictive sd of
        ln y, :func:`bayescale.error_model.heldout_errors`), ``beyond`` (decades beyond the runs it was predicted
        from) and ``block``; and how they were made (empty table: why none).
    """
    runs = runs.reset_index(drop=True)
    empty = pd.DataFrame(columns=["r", "s", "beyond", "block"])
    if (runs["y"] <= 0).any():
        return empty, "needs positive outcomes"
    names = list(law.input_names)
    size = run_size(law, runs)
    order = np.argsort(-size if law.toward == "max" else size, kind="stable")  # furthest first
    n_out = max(1, int(round(holdout * len(runs))))
    while n_out and len(runs.drop(index=order[:n_out]).drop_duplicates(subset=names)) < law.needs_points:
        n_out -= 1
    if not n_out:
        return empty, f"no run could be held out ({len(runs)} runs; law {law.name!r} needs {law.needs_points})"
    near_first = order[:n_out][::-1]
    tables, start = [], 0
    for j, block in enumerate(np.array_split(near_first, min(n_out, MAX_BLOCKS))):
        future = np.zeros(len(runs), bool)
        future[near_first[start:]] = True  # this block and every block further out
        start += len(block)
        try:
            sub = refit(runs[~future], seed + j)
            tables.append(_refit_errors(law, sub, runs.iloc[block], runs[~future], seed)[0].assign(block=j))
        except BayescaleError:  # e.g. the runs below it fail a data check the whole table passes: no such block
            continue
    if not tables:
        return empty, "no refit without the largest runs could be made"
    which = "largest" if law.toward == "max" else "smallest"
    return (pd.concat(tables, ignore_index=True),
            f"leave-future-out refits without the {n_out} {which} run{'s' * (n_out != 1)} in {len(tables)} "
            f"block{'s' * (len(tables) != 1)}")


def distance_from(law, frame: pd.DataFrame, targets: pd.DataFrame) -> np.ndarray:
    """How far each point of ``frame`` lies from the range of ``targets``: max over inputs, in decades (log inputs)
    or units (linear inputs); 0 inside the targets' range."""
    # the targets' range plays the fitted runs' part in distance_beyond (their y is not needed: a placeholder)
    return distance_beyond(law, frame, scales_for(law, targets.assign(y=1.0)))


def localize(fit, targets: pd.DataFrame, tau: float, seed: int | None = None, recalibrate: bool = False,
             refit=None):
    """``fit``'s law refitted as a local approximation around ``targets`` (law input columns).

    Each run gets an extra error ``tau * d`` (ln units, in quadrature with its noise; ``d`` from
    :func:`distance_from`), so runs far from the targets count little. The result predicts beyond its runs with
    ``fit``'s extrapolation error; with ``recalibrate`` that error becomes the larger of it and the local fit's own
    (:func:`calibrate` on the local fit). ``refit`` as for :func:`calibrate`.
    """
    runs = fit.runs.reset_index(drop=True)
    y = runs["y"].to_numpy(float)
    extra = float(tau) * distance_from(fit.law, runs, targets) * np.abs(y)  # ln units -> y units (se / y)
    old = runs["se"].to_numpy(float) if "se" in runs else np.zeros(len(runs))
    new = (refit or default_refit)(fit, runs.assign(se=np.sqrt(old**2 + extra**2)), fit.seed if seed is None else seed,
                                   None)
    new = new.with_error(fit.error)
    new.local = {"targets": targets[list(fit.law.input_names)].reset_index(drop=True), "tau": float(tau)}
    if recalibrate:
        cal = calibrate(new, seed=seed, refit=refit)
        new = new.with_discrepancy(max(cal.tau, fit.discrepancy))
        new.calibration = cal
    return new


def local_errors(model_fits, law, frame: pd.DataFrame):
    """Extra error (ln units) of each point of ``frame`` under local fits (:func:`localize`): tau x its distance
    from their targets; None when no fit is local. All fits must be localized alike."""
    loc = [getattr(f, "local", None) for f in model_fits]
    if not any(loc):
        return None
    if not all(loc) or len({(l_["tau"], l_["targets"].to_json()) for l_ in loc}) > 1:
        raise BayescaleError("the model average mixes local and global fits (or fits localized differently): "
                             "localize every family to the same target and tau")
    return loc[0]["tau"] * distance_from(law, frame, loc[0]["targets"])
