"""Scores of probabilistic predictions of held-out runs: accuracy, log density, calibration, sharpness, CRPS.

All functions are vectorised NumPy (float64) and validate their inputs. Definitions follow the reference code of
NSL-PFN (Lee et al., ICML 2025, "Bayesian Neural Scaling Law Extrapolation with Prior-Data Fitted Networks",
``inference.py``/``get_msce.py``) so that our numbers sit beside their published ones:

- RMSLE of one curve: ``sqrt(mean_i (ln pred_i - ln y_i)^2)`` over its predicted points, natural log, no ``+1``
  (NSL-PFN's ``get_metric``); suites report the mean over curves. Alabdulmohsin et al. 2022 score their
  benchmark by an extrapolation RMSE of their own; we match NSL-PFN because its published figures (which include
  the least-squares M4 baseline on that benchmark) are the reference rows we report beside ours. No ``+1``: the
  y are error rates and losses, and a ``+1`` would shrink the score.
- Log-likelihood of one curve: the mean over its predicted points of ``log p(y_i)``, the predictive density of each
  point on its own (NSL-PFN: ``-criterion(pred, y).mean()``), in the y units the predictor saw (raw y for the
  revisiting benchmark, ``y / max(context y)`` for ColPret); :func:`rescale_log_density` converts units.
- MSCE (mean squared calibration error) of one curve: the mean over the levels 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99
  of ``(coverage - level)^2``, coverage = share of the curve's predicted points inside the central interval
  (NSL-PFN's ``bardist_calibration``); suites report the mean over curves.

CRPS (:func:`crps_from_draws`) and interval width are additional proper/sharpness scores.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "MSCE_LEVELS", "coverage", "crps_from_draws", "crps_gaussian", "interval_width", "log_mean_exp",
    "lognormal_mixture_logpdf", "msce", "rescale_log_density", "rmsle",
]

MSCE_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


def _arr(v, name: str) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf; drop those points or fix the prediction")
    return a


def _positive(v, name: str) -> np.ndarray:
    a = _arr(v, name)
    if np.any(a <= 0):
        raise ValueError(f"{name} must be > 0 for a log-scale score (min {a.min():.4g}); RMSLE needs positive "
                         "predictions and observations")
    return a


def rmsle(pred, observed, axis=-1) -> np.ndarray | float:
    """Root mean squared log error ``sqrt(mean (ln pred - ln observed)^2)`` along ``axis`` (NSL-PFN's RMSLE)."""
    p, y = _positive(pred, "pred"), _positive(observed, "observed")
    if p.shape != y.shape:
        raise ValueError(f"pred and observed differ in shape: {p.shape} vs {y.shape}")
    return np.sqrt(np.mean((np.log(p) - np.log(y)) ** 2, axis=axis))


def coverage(lower, upper, observed) -> np.ndarray | float:
    """Share of ``observed`` inside ``[lower, upper]`` (inclusive), averaged over the last axis.

    ``lower``/``upper`` of shape (..., m) against ``observed`` (m,): e.g. (levels, m) gives one coverage per level.
    """
    lo, hi, y = _arr(lower, "lower"), _arr(upper, "upper"), _arr(observed, "observed")
    if lo.shape != hi.shape or lo.shape[-1:] != y.shape[-1:]:
        raise ValueError(f"lower {lo.shape}, upper {hi.shape} and observed {y.shape} must agree on the last axis")
    return np.mean((y >= lo) & (y <= hi), axis=-1)


def msce(levels, cover) -> float:
    """Mean squared calibration error ``mean_l (coverage_l - level_l)^2`` (NSL-PFN's MSCE)."""
    lv, c = _arr(levels, "levels"), _arr(cover, "coverage")
    if lv.shape != c.shape:
        raise ValueError(f"levels {lv.shape} and coverage {c.shape} must have the same shape")
    if np.any((lv <= 0) | (lv >= 1)) or np.any((c < 0) | (c > 1)):
        raise ValueError("levels must lie in (0, 1) and coverages in [0, 1]")
    return float(np.mean((c - lv) ** 2))


def interval_width(lower, upper) -> float:
    """Mean width ``upper - lower`` of intervals (y units)."""
    lo, hi = _arr(lower, "lower"), _arr(upper, "upper")
    if np.any(hi < lo):
        raise ValueError("some upper bounds lie below their lower bounds")
    return float(np.mean(hi - lo))


def crps_from_draws(draws, observed) -> np.ndarray:
    """Sample CRPS of each point: ``E|X - y| - E|X - X'|/2`` over the draws ``(S, m)``, O(S log S) per point.

    Uses the empirical distribution of the draws (``E|X - X'|`` from the sorted draws:
    ``2/S^2 sum_i (2i - S - 1) x_(i)``). Lower is better; in y units. Returns (m,).
    """
    x, y = _arr(draws, "draws"), _arr(observed, "observed")
    if x.ndim == 1:
        x = x[:, None]
    y = np.atleast_1d(y)
    if x.shape[1:] != y.shape:
        raise ValueError(f"draws must be (S, m) for observed (m,); got {x.shape} and {y.shape}")
    s = x.shape[0]
    xs = np.sort(x, axis=0)
    term1 = np.mean(np.abs(xs - y[None, :]), axis=0)
    i = np.arange(1, s + 1, dtype=np.float64)[:, None]
    term2 = np.sum((2 * i - s - 1) * xs, axis=0) / s**2  # = E|X - X'| / 2
    return term1 - term2


def crps_gaussian(mu, sigma, observed) -> np.ndarray:
    """Closed-form CRPS of a Normal(mu, sigma) predictive (Gneiting & Raftery 2007)."""
    from scipy.stats import norm  # scipy.stats is slow to import

    mu, sd, y = _arr(mu, "mu"), _arr(sigma, "sigma"), _arr(observed, "observed")
    z = (y - mu) / sd
    return sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))


def log_mean_exp(logp, axis=0) -> np.ndarray:
    """``log mean exp`` along ``axis``: the log of a Monte Carlo mixture density from per-draw log densities."""
    a = np.asarray(logp, dtype=np.float64)
    return logsumexp(a, axis=axis) - np.log(a.shape[axis])


def lognormal_mixture_logpdf(observed, log_mu, sigma, weights=None, df: float | None = None) -> np.ndarray:
    """Log density of ``observed`` (m,) under a mixture of LogNormal(log_mu[k], sigma[k]) components, y units
    (with ``df``: log-Student-t components, ``ln y ~ StudentT(df, log_mu[k], sigma[k])``).

    ``log_mu`` (K, m), ``sigma`` (K,) or (K, m), optional ``weights`` (K,) (default equal). K = 1 is a single
    Gaussian in log space: the residual-sigma predictive of a least-squares point fit.
    """
    y = _positive(observed, "observed")
    lm = np.atleast_2d(_arr(log_mu, "log_mu"))
    sd = _arr(sigma, "sigma")
    sd = sd[:, None] if sd.ndim == 1 else sd
    if np.any(sd <= 0):
        raise ValueError("sigma must be > 0")
    from scipy import stats  # on first use: SciPy's statistics are slow to import

    ly = np.log(y)[None, :]  # the density of y is that of ln y over y
    lp = (stats.norm.logpdf(ly, lm, sd) if df is None else stats.t.logpdf(ly, df, lm, sd)) - ly
    if weights is None:
        return log_mean_exp(lp, axis=0)
    w = _arr(weights, "weights")
    if np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be >= 0 with a positive sum")
    with np.errstate(divide="ignore"):
        return logsumexp(lp + np.log(w / w.sum())[:, None], axis=0)


def rescale_log_density(logp, c) -> np.ndarray:
    """Log density in units ``y' = y / c``: ``log p'(y') = log p(y) + log c`` (``c`` > 0, scalar or per point)."""
    c = _positive(c, "c")
    return np.asarray(logp, dtype=np.float64) + np.log(c)
