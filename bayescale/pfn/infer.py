"""Prediction with the bundled PFN weights: predictive distributions in original y units, and Bands.

The network sees ``u`` (ln x, min-max scaled on the context) and ``z`` (ln y standardised on the context); its
output is a full-support bar distribution over ``z`` at each query. Here it is mapped back to y:
``y = exp(m + s z)``, so ``logpdf_y(y) = logpdf_z(z) - ln s - ln y`` and ``cdf_y(y) = cdf_z(z)``. The network runs
in float32; the bar distribution (probabilities, CDF, quantiles, Jacobian) is evaluated in float64.

By default the predictive is recalibrated (:mod:`bayescale.pfn.recalibration`, Kuleshov et al. 2018): with ``F`` the
network's CDF and ``R`` a monotone map fitted on held-out prior draws (one for queries beyond the context's x range,
one for those inside it), ``cdf = R(F)``, ``quantile(q) = F^{-1}(R^{-1}(q))``, ``logpdf = ln R'(F) + logpdf_F``.
``calibrated=False`` gives the raw network's predictive. A context longer than the network reads is seen in several
thinnings whose predictives are mixed (:func:`context_views`), and beyond the context the predictive carries the
extrapolation error real curves show (:mod:`bayescale.pfn.error`; ``error="raw"``: none).

Nothing is downloaded: weights are read from ``bayescale/pfn/weights/`` (or a path given), and their sha256 is
checked against the JSON beside them before use (:mod:`bayescale.pfn.weights`).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy.special import logsumexp

from bayescale.bands import DEFAULT_LEVELS, check_levels, interval_probs, make_bands_from_quantiles
from bayescale.error_model import ErrorModel
from bayescale.errors import RunTableError, SettingError
from bayescale.pfn.bar import BarDistribution
from bayescale.pfn.error import (OWN_VIEWS, curve_error, default_error_model, held_out_errors, split_context,
                                 spread)
from bayescale.pfn.network import PFNConfig
from bayescale.pfn.prior import MIN_CONTEXT, RUN_TABLE, normalize
from bayescale.pfn.weights import PFNWeights, PFNWeightsError, read_weights, weights_path
from bayescale.runs import distance_beyond, outside, prepare_runs, query_points, read_runs, scales_for

__all__ = ["Predictive", "available", "load", "own_errors_many", "predict", "predictive", "predictive_many"]

QUERY_CHUNK = 256  # queries per row at most (the context is repeated for each chunk of a curve's queries)
CURVE_CHUNK = 64  # rows per compiled call
DEFAULT_VIEWS = 8  # context views per curve (test-time ensembling, :func:`context_views`); chosen on the real
# suites' fit splits by `python -m benchmarks.pfn_views` (log density of 1, 2, 4, 8 views)
CURVE_NOTE = ("the PFN predicts observed runs (noise included) and has no separate mean-curve distribution: "
              "curve_* repeat run_*")


@eqx.filter_jit
def _forward(m, u, z, c, n_keys):
    """The network ``m`` on a batch of rows (one compiled program per network shape and batch shape, shared by every
    set of weights of that shape)."""
    return jax.vmap(lambda *a: m(*a, n_keys))(u, z, c)


class _Loaded:
    """Verified weights (the fields of :class:`~bayescale.pfn.weights.PFNWeights`)."""

    def __init__(self, w: PFNWeights):
        self.model, self.cfg, self.borders, self.info, self.path, self.recal = w


def _round_up(n: int, k: int) -> int:
    return int(math.ceil(n / k) * k)


def _query_chunk(n_queries: list, n_keys: int) -> int:
    """Queries per row (a power of two from 16 to :data:`QUERY_CHUNK`) that makes the fewest tokens in all: short
    chunks repeat the context, long ones pad rows with unused queries."""
    options = [16 * 2**k for k in range(int(math.log2(QUERY_CHUNK // 16)) + 1)]
    return min(options, key=lambda c: sum(-(-n // c) for n in n_queries) * (n_keys + c))


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Bin probabilities from float32 logits, in float64 (the bar distribution's tails need the precision)."""
    lg = np.asarray(logits, np.float64)
    p = np.exp(lg - lg.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def load(path=None) -> _Loaded:
    """Load and verify PFN weights (sha256, config, array shapes); raises :class:`PFNWeightsError`."""
    p = weights_path(path)
    key = (str(p), p.stat().st_mtime_ns if p.exists() else 0,
           p.with_suffix(".json").stat().st_mtime_ns if p.with_suffix(".json").exists() else 0)
    return _load(*key)


@lru_cache(maxsize=4)
def _load(path: str, _m1, _m2) -> _Loaded:
    return _Loaded(read_weights(path))


def available(path=None) -> bool:
    """Whether the (bundled) PFN weights are present and valid."""
    try:
        load(path)
        return True
    except PFNWeightsError:
        return False


# ------------------------------------------------------------------------------------------------------
# The predictive distribution


def _bisect(f, q, lo, hi, steps: int) -> np.ndarray:
    """Solve ``f(t) = q`` elementwise for a non-decreasing ``f`` with ``f(lo) <= q <= f(hi)`` (arrays of one
    shape): ``steps`` halvings, then one linear step across the bracket, where ``f`` is about linear."""
    lo, hi = np.array(lo, float), np.array(hi, float)
    f_lo, f_hi = f(lo), f(hi)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        below = fm < q
        lo, f_lo = np.where(below, mid, lo), np.where(below, fm, f_lo)
        hi, f_hi = np.where(below, hi, mid), np.where(below, f_hi, fm)
    return lo + np.clip((q - f_lo) / np.maximum(f_hi - f_lo, 1e-300), 0, 1) * (hi - lo)


class Predictive:
    """Predictive distribution of an observed y at ``m`` query points (one curve), in original y units.

    An equal mixture over ``V`` views of the context (:func:`context_views`): view v is a full-support bar
    distribution (:class:`~bayescale.pfn.bar.BarDistribution`) over ``z_v = (ln y - loc_v) / scale_v`` with bin
    probabilities ``probs[v]`` (m, K), so ``F(y) = mean_v F_v(z_v)`` and
    ``f(y) = mean_v f_v(z_v) / (scale_v y)``; a mixture's quantiles bisect its CDF between the views' own
    quantiles. ``probs`` (m, K) with scalar ``loc``/``scale`` is one view. ``quantile(q)``: scalar q -> (m,),
    array -> (len(q), m); ``logpdf(y)``, ``cdf(y)``: (m,) for y of shape (m,) (or broadcastable);
    ``sample(n, seed)`` -> (n, m); ``median()``, ``mean()`` -> (m,).

    ``beyond`` (m,): decades of x outside the context's range (0 inside). With ``recalibration`` (a
    :class:`~bayescale.pfn.recalibration.Recalibration`), queries with ``beyond > 0`` take its extrapolated map, the
    others its interpolated one; ``calibrated`` says whether a map is applied. With ``spread`` (shifts (J, m) of
    ln y and weights (J,), :func:`bayescale.pfn.error.spread`), ln y is a draw of that calibrated predictive plus
    shift j with probability w_j: the extrapolation error of real curves (``error_note`` says which). Its quantiles
    invert that mixture's CDF by bisection (the calibrated CDF read off a table per query, levels exact to
    :data:`CORE`); its mean and the moments of ln y follow exactly from the shifts' moments; a draw adds one shift,
    the same at every query (one bend of the curve).
    """

    CAL_GRID = 513  # even points in ln y per query where the calibrated CDF is tabulated for the error's quantiles
    CORE = 1e-3  # ... between its levels CORE and 1 - CORE
    BISECT = 12  # bisection steps of a mixture's quantile (of views, of the error's shifts), then one linear step

    def __init__(self, probs, borders, loc, scale, x_query=None, seed: int = 0, beyond=None, recalibration=None,
                 spread=None, error_note: str = ""):
        probs = np.asarray(probs, np.float64)
        self.probs = probs if probs.ndim == 3 else probs[None]  # (V, m, K)
        self.loc = np.broadcast_to(np.asarray(loc, np.float64).reshape(-1), (len(self.probs),))  # (V,)
        self.scale = np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (len(self.probs),))
        self.bar = BarDistribution(np.asarray(borders, np.float64))
        self.borders = self.bar.borders  # (K + 1,)
        self.x_query = None if x_query is None else np.asarray(x_query, float)
        self.seed = seed
        self.beyond = None if beyond is None else np.broadcast_to(np.asarray(beyond, float), (len(self),))
        self._recal = recalibration
        if recalibration is not None and self.beyond is None:
            raise ValueError("a recalibrated Predictive needs beyond= (which queries lie outside the context)")
        self.calibrated = recalibration is not None
        self.spread = None
        if spread is not None:  # (shifts (J, m) in ln y, weights (J,)): the extrapolation error's quadrature
            shifts, w = np.asarray(spread[0], np.float64), np.asarray(spread[1], np.float64)
            if shifts.ndim != 2 or shifts.shape != (len(w), len(self)) or not np.all(np.isfinite(shifts)) \
                    or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
                raise ValueError("spread must be (shifts (J, m) finite, weights (J,) >= 0 summing to 1)")
            self.spread = (shifts, w) if np.any(shifts) else None
        self.error_note = error_note
        self._table = self._stacked = None

    def __len__(self) -> int:
        return self.probs.shape[1]

    @property
    def n_views(self) -> int:
        return len(self.probs)

    # -- recalibration map R, per query (identity when uncalibrated) -------------------------------------------
    def _kinds(self):
        ext = self.beyond > 0
        return [(kind, mask) for kind, mask in (("extrapolated", ext), ("interpolated", ~ext)) if mask.any()]

    def _r(self, p):
        """R(p) for raw PIT values p (..., m)."""
        if not self.calibrated:
            return p
        out = np.array(p, float)
        for kind, mask in self._kinds():
            out[..., mask] = self._recal.forward(kind, p[..., mask])
        return out

    def _r_inv(self, q):
        """R^{-1}(q): levels q (n,) -> raw levels (n, m)."""
        q = np.asarray(q, float)
        out = np.repeat(q[:, None], len(self), axis=1)
        if self.calibrated:
            for kind, mask in self._kinds():
                out[:, mask] = self._recal.inverse(kind, q)[:, None]
        return out

    def _log_r_slope(self, p):
        """ln R'(p) for raw PIT values p (..., m)."""
        out = np.zeros(np.shape(p))
        if self.calibrated:
            for kind, mask in self._kinds():
                out[..., mask] = self._recal.log_slope(kind, p[..., mask])
        return out

    # -- the raw mixture, in ln y -------------------------------------------------------------------------------
    def _rows(self):
        """The views' bin probabilities as rows (V m, K), view-major, prepared once
        (:meth:`~bayescale.pfn.bar.BarDistribution.prepare`)."""
        if self._stacked is None:
            self._stacked = self.bar.prepare(self.probs.reshape(-1, self.probs.shape[-1]))
        return self._stacked

    def _raw_cdf(self, lny) -> np.ndarray:
        """Raw mixture CDF at ``lny`` (..., m): every view in one pass, the views as rows."""
        lny = np.asarray(lny, float)
        z = (lny[..., None, :] - self.loc[:, None]) / self.scale[:, None]  # (..., V, m)
        f = self.bar.cdf(self._rows(), z.reshape(*z.shape[:-2], -1))
        return f.reshape(z.shape).mean(axis=-2)

    def _raw_quantile(self, r) -> np.ndarray:
        """ln y at raw levels ``r`` (n, m): one view's own, or by bisection of the mixture's CDF between the views'
        quantiles at the same levels (the mixture's lies between them)."""
        ends = self._view_quantiles(r)  # (V, n, m)
        if self.n_views == 1:
            return ends[0]
        return _bisect(self._raw_cdf, r, ends.min(axis=0), ends.max(axis=0), self.BISECT)

    def _view_quantiles(self, r) -> np.ndarray:
        """Each view's ln y at raw levels ``r`` ((n,) or (n, m)) -> (V, n, m)."""
        r = np.broadcast_to(np.asarray(r, float).reshape(len(r), -1), (len(r), len(self)))
        z = self.bar.quantile(self._rows(), np.tile(r, (1, self.n_views))).reshape(len(r), self.n_views, len(self))
        return np.moveaxis(self.loc[:, None] + self.scale[:, None] * z, 1, 0)

    def _cal_quantile_ln(self, q) -> np.ndarray:
        """ln y of the calibrated predictive, before the extrapolation error, at levels ``q`` (n,) -> (n, m)."""
        return self._raw_quantile(self._r_inv(q))

    # -- calibrated, before the extrapolation error, in ln y --------------------------------------------------------
    def _cal_cdf(self, lny) -> np.ndarray:
        return self._r(self._raw_cdf(lny))

    def _cal_logpdf(self, lny) -> np.ndarray:
        """Log density of ln y at ``lny`` (m,)."""
        with np.errstate(divide="ignore"):
            per_view = [self.bar.logpdf(np.log(p), (lny - m) / s) - math.log(s)
                        for p, m, s in zip(self.probs, self.loc, self.scale)]
        out = logsumexp(per_view, axis=0) - math.log(self.n_views)
        return out + self._log_r_slope(self._raw_cdf(lny)) if self.calibrated else out

    # -- with the extrapolation error: ln y = (calibrated draw) + shift_j with probability w_j ---------------------
    def _quantile_ln(self, q) -> np.ndarray:
        """ln y at levels ``q`` (n,) -> (n, m). With the extrapolation error: bisection of
        ``F_err(t) = sum_j w_j F(t - shift_j) = q`` per level and query, ``F`` read off :meth:`_cal_table`."""
        if self.spread is None:
            return self._cal_quantile_ln(q)
        shifts, w = self.spread
        t0, h, table = self._cal_table()
        n_grid, m = table.shape
        top = t0 + h * (n_grid - 1)
        cols, start = np.arange(m), (shifts + t0) / h  # grid position of t is t / h - start: (J, m)
        flat, slope = table.ravel(), np.diff(table, axis=0).ravel()

        def f_err(t):  # (n, m)
            g = np.clip(t[None] / h - start[:, None, :], 0, n_grid - 1)  # (J, n, m)
            i = np.minimum(g.astype(int), n_grid - 2)
            k = i * m + cols
            return np.einsum("j,jnm->nm", w, flat.take(k) + (g - i) * slope.take(k))

        lo = np.broadcast_to(t0 + shifts.min(axis=0), (len(q), len(self)))
        hi = np.broadcast_to(top + shifts.max(axis=0), lo.shape)
        return _bisect(f_err, np.broadcast_to(q[:, None], lo.shape), lo, hi, self.BISECT)

    def _cal_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The calibrated CDF (before the extrapolation error) on an even grid of ln y per query: its start and step
        (m,) and values (G, m), G = :data:`CAL_GRID`, spanning the levels :data:`CORE` to 1 - CORE of every view
        (beyond them it reads as the end values: levels off by at most CORE); computed once."""
        if self._table is None:
            ends = self._view_quantiles(self._r_inv(np.array([self.CORE, 1 - self.CORE])))  # (V, 2, m)
            lo, hi = ends.min(axis=(0, 1)), ends.max(axis=(0, 1))
            h = np.maximum(hi - lo, 1e-9) / (self.CAL_GRID - 1)
            raw = self.bar.cdf_grid(self._rows(), ((lo[None, :] - self.loc[:, None]) / self.scale[:, None]).ravel(),
                                    (h[None, :] / self.scale[:, None]).ravel(), self.CAL_GRID,
                                    into=np.tile(np.arange(len(self)), self.n_views))
            self._table = (lo, h, self._r(np.clip(raw.T / self.n_views, 0.0, 1.0)))
        return self._table

    # -- in y -------------------------------------------------------------------------------------------------
    @staticmethod
    def _ln(y):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(np.where(y > 0, y, np.nan))

    def logpdf(self, y) -> np.ndarray:
        """Log density of observed y (original units, Jacobian of y -> z included); -inf for y <= 0."""
        y = np.broadcast_to(np.asarray(y, float), (len(self),))
        lny = np.nan_to_num(self._ln(y))
        if self.spread is None:
            out = self._cal_logpdf(lny)
        else:
            shifts, w = self.spread
            with np.errstate(divide="ignore"):
                out = logsumexp([np.log(wk) + self._cal_logpdf(lny - sk) for sk, wk in zip(shifts, w) if wk > 0],
                                axis=0)
        return np.where(y > 0, out - np.log(np.where(y > 0, y, 1.0)), -np.inf)

    def cdf(self, y) -> np.ndarray:
        y = np.broadcast_to(np.asarray(y, float), (len(self),))
        lny = np.nan_to_num(self._ln(y), nan=-np.inf)
        if self.spread is None:
            out = self._cal_cdf(lny)
        else:
            shifts, w = self.spread
            out = sum(wk * self._cal_cdf(lny - sk) for sk, wk in zip(shifts, w))
        return np.where(y > 0, out, 0.0)

    def quantile(self, q) -> np.ndarray:
        qa = np.asarray(q, float)
        if np.any(~np.isfinite(qa)) or np.any((qa <= 0) | (qa >= 1)):
            raise ValueError(f"quantile levels must lie strictly between 0 and 1, got {q}")
        out = np.exp(self._quantile_ln(np.atleast_1d(qa)))
        return out[0] if qa.ndim == 0 else out

    def median(self) -> np.ndarray:
        return self.quantile(0.5)

    def _shift_moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of the extrapolation error's shift s of ln y, per query: E[s], Var[s] and E[exp(s)] (0, 0, 1 without)."""
        if self.spread is None:
            return np.zeros(len(self)), np.zeros(len(self)), np.ones(len(self))
        shifts, w = self.spread
        m1 = w @ shifts
        return m1, w @ shifts**2 - m1**2, w @ np.exp(shifts)

    def mean(self, n_grid: int = 2000) -> np.ndarray:
        """Mean of y: the calibrated predictive's (midpoint rule over quantiles; the far tails beyond 1/n_grid are
        left out) times E[exp(shift)] of the extrapolation error, which is independent of it."""
        q = (np.arange(n_grid) + 0.5) / n_grid
        return np.exp(self._cal_quantile_ln(q)).mean(axis=0) * self._shift_moments()[2]

    def moments_ln(self, n_grid: int = 400) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of ln y (m,) each: the calibrated predictive's (midpoint rule over quantiles) plus the
        extrapolation error's shift."""
        lq = self._cal_quantile_ln((np.arange(n_grid) + 0.5) / n_grid)
        m1, var, _ = self._shift_moments()
        return lq.mean(axis=0) + m1, np.sqrt(lq.var(axis=0) + var)

    def sample(self, n: int, seed: int | None = None) -> np.ndarray:
        """``n`` draws (n, m): a calibrated draw of ln y plus a shift of the extrapolation error drawn with its
        weight."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        u = rng.uniform(1e-12, 1 - 1e-12, size=int(n))
        lny = self._cal_quantile_ln(u)
        if self.spread is not None:
            shifts, w = self.spread
            lny = lny + shifts[rng.choice(len(w), size=int(n), p=w)]
        return np.exp(lny)


# ------------------------------------------------------------------------------------------------------
# Running the network


def _check_curve(i, x_ctx, y_ctx, x_query):
    where = "" if i is None else f" (curve {i})"
    x_ctx, y_ctx, x_query = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (x_ctx, y_ctx, x_query))
    if x_ctx.ndim != 1 or y_ctx.shape != x_ctx.shape:
        raise RunTableError(f"x_ctx and y_ctx must be 1-d and of equal length{where}; got {x_ctx.shape}, {y_ctx.shape}")
    for name, a in (("x_ctx", x_ctx), ("y_ctx", y_ctx), ("x_query", x_query)):
        if not np.all(np.isfinite(a)):
            raise RunTableError(f"{name}{where} has NaN or infinite values; drop or fix them")
        if np.any(a <= 0):
            raise RunTableError(f"{name}{where} must be > 0 (the PFN works on ln x and ln y); got {a[a <= 0][0]:g}. "
                                "Remove non-positive values (for a metric that can be 0, predict the error 1 - acc or add an offset)")
    if len(np.unique(x_ctx)) < MIN_CONTEXT:
        raise RunTableError(f"the PFN needs at least {MIN_CONTEXT} distinct context x values{where}; got "
                            f"{len(np.unique(x_ctx))}. Add runs.")
    if x_query.size == 0:
        raise RunTableError(f"no query points{where}")
    return x_ctx, y_ctx, x_query.ravel()


def max_context(cfg: PFNConfig) -> int:
    """Most context points the network sees: training curves had at most ``n_points`` positions in all."""
    return max(cfg.n_points - 8, MIN_CONTEXT)


def context_views(x, y, k: int, n_views: int = 1) -> list:
    """Up to ``n_views`` subsets ``(x, y)`` of a context, each of at most ``k`` points, sorted by x.

    A context of ``k`` points or fewer is one view, itself. A longer one is thinned to ``k`` points evenly spaced in
    rank of x, keeping the first and the last run; view ``v`` shifts the interior points by
    ``(v + 1/2) / n_views - 1/2`` of their spacing, so together the views see every run when the spacing is at most
    about ``n_views + 1`` runs. Identical views are dropped.
    """
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    n = len(x)
    if n <= k:
        return [(x, y)]
    step = (n - 1) / (k - 1)
    views, seen = [], set()
    for v in range(max(int(n_views), 1)):
        shift = ((v + 0.5) / n_views - 0.5) * step  # offsets centred on the plain thinning (v = 0 of one view)
        inner = np.clip(np.round(np.linspace(0, n - 1, k)[1:-1] + shift), 1, n - 2).astype(int)
        keep = np.unique(np.r_[0, inner, n - 1])
        if keep.tobytes() not in seen:
            seen.add(keep.tobytes())
            views.append((x[keep], y[keep]))
    return views


def _error_model(error):
    """The :class:`~bayescale.error_model.ErrorModel` behind ``error``: "default" (the shipped one), "raw" or None
    (no extrapolation error), or a model."""
    if isinstance(error, ErrorModel):
        return error
    if error is None or (isinstance(error, str) and error == "raw"):
        return None
    if isinstance(error, str) and error == "default":
        return default_error_model()
    raise SettingError(f"error must be 'default', 'raw' or an ErrorModel, got {error!r}")


def predictive_many(curves, seed: int = 0, weights=None, calibrated: bool = True,
                    views: int = DEFAULT_VIEWS, error="default", own_errors: bool = True) -> list[Predictive]:
    """One :class:`Predictive` per ``(x_ctx, y_ctx, x_query)`` in ``curves``, all in a few batched calls.

    A curve with more context points than the network was trained on (:func:`max_context`, 40 for ``small``) is
    thinned to that many, evenly spaced in rank of x, keeping the first and the last run; with ``views`` > 1 the
    network sees up to that many such thinnings (:func:`context_views`) and the predictive is their equal mixture
    (test-time ensembling), so no run is thrown away. ``calibrated``: apply the weights' recalibration map (when
    their JSON has one); ``False``: the raw network's predictive. ``error``: the extrapolation error real curves
    show beyond the context (:mod:`bayescale.pfn.error`; ``"default"``: the shipped model, ``"raw"``: none).
    ``own_errors``: update each curve's error with the network's errors on the later runs of its own context
    predicted from the earlier ones (:func:`bayescale.pfn.error.split_context`; one more pass of the network);
    ``False``: the corpus prior alone.
    """
    model = _error_model(error)
    L = load(weights)
    curves = [_check_curve(i if len(curves) > 1 else None, *c) for i, c in enumerate(curves)]
    if not curves:
        return []
    k_max = max_context(L.cfg)
    curve_views = [context_views(xc, yc, k_max, views) for xc, yc, _ in curves]
    # one row per view and chunk of queries: the context first (attention keys read only those leading positions,
    # so the row's cost is linear in its queries), then the queries, then padding that repeats the first query
    n_keys = _round_up(max(len(v[0]) for cv in curve_views for v in cv), 8)
    chunk = _query_chunk([len(xq) for (_, _, xq), cv in zip(curves, curve_views) for _ in cv], n_keys)
    n_tok = n_keys + chunk
    rows_t, rows_y, rows_c, index = [], [], [], []
    for ci, ((_, _, xq), cv) in enumerate(zip(curves, curve_views)):
        for vi, (xc, yc) in enumerate(cv):
            for start in range(0, len(xq), chunk):
                q = xq[start:start + chunk]
                t = np.full(n_tok, np.log(q[0]))
                y = np.ones(n_tok)
                c = np.zeros(n_tok, bool)
                t[:len(xc)], y[:len(xc)], c[:len(xc)] = np.log(xc), yc, True
                t[n_keys:n_keys + len(q)] = np.log(q)
                rows_t.append(t), rows_y.append(y), rows_c.append(c)
                index.append((ci, vi, len(q)))
    T, Y, C = np.stack(rows_t), np.stack(rows_y), np.stack(rows_c)
    u, z, (t0, tspan, m, s) = normalize(T, Y, C, xp=np)
    n_rows = _round_up(len(T), CURVE_CHUNK) if len(T) > CURVE_CHUNK else len(T)
    if n_rows > len(T):  # a fixed row count so the compiled program is reused
        u, z, C2 = (np.concatenate([a, np.repeat(a[:1], n_rows - len(T), 0)]) for a in (u, z, C))
    else:
        C2 = C
    logits = np.concatenate([np.asarray(_forward(L.model, jnp.asarray(u[sl], jnp.float32),
                                                 jnp.asarray(z[sl], jnp.float32), jnp.asarray(C2[sl]), n_keys))
                             for sl in (slice(a, a + CURVE_CHUNK) for a in range(0, len(T), CURVE_CHUNK))])
    out_probs = [[[] for _ in cv] for cv in curve_views]
    stats = [[None] * len(cv) for cv in curve_views]
    for r, (ci, vi, nq) in enumerate(index):
        out_probs[ci][vi].append(logits[r, n_keys:n_keys + nq])
        stats[ci][vi] = (float(m[r, 0]), float(s[r, 0]))
    out_probs = [[_softmax(np.concatenate(p)) for p in cv] for cv in out_probs]  # float64, the queries' rows only
    recal = L.recal if calibrated else None
    own = ([None] * len(curves) if model is None or not own_errors
           else own_errors_many([(xc, yc) for xc, yc, _ in curves], seed=seed, weights=weights, calibrated=calibrated))
    out = []
    for i, ((xc, yc, xq), cv) in enumerate(zip(curves, curve_views)):
        loc, scale = np.array(stats[i]).T
        beyond = outside(np.log(xq), np.log(xc.min()), np.log(xc.max()), scale="log")
        err = None if model is None else curve_error(model, xc, yc, own[i])
        out.append(Predictive(np.stack(out_probs[i]), L.borders, loc, scale,
                              x_query=xq, seed=seed, recalibration=recal, beyond=beyond,
                              spread=None if err is None else spread(err, beyond),
                              error_note="none (raw)" if err is None else err.describe()))
    return out


def own_errors_many(contexts, seed: int = 0, weights=None, calibrated: bool = True) -> list[pd.DataFrame]:
    """Each context's own errors: the network (:data:`~bayescale.pfn.error.OWN_VIEWS` views, no extrapolation
    error) predicts the later runs of :func:`~bayescale.pfn.error.split_context` from the earlier ones.

    Parameters
    ----------
    contexts : list of (x, y)
        Context runs per curve (arrays, x > 0, y > 0).
    seed, weights, calibrated
        As for :func:`predictive_many`.

    Returns
    -------
    list of DataFrame
        Per curve, :func:`~bayescale.pfn.error.held_out_errors` of its later runs (``r``, ``s``, ``beyond`` from
        the earlier runs); no rows when its context is too short to cut.
    """
    cuts = []  # (curve, earlier x, earlier y, later x, later y)
    for i, (xc, yc) in enumerate(contexts):
        xc, yc = np.asarray(xc, float), np.asarray(yc, float)
        if (ab := split_context(xc, yc)) is not None:
            cuts.append((i, xc[ab[0]], yc[ab[0]], xc[ab[1]], yc[ab[1]]))
    preds = predictive_many([(xa, ya, xb) for _, xa, ya, xb, _ in cuts], seed=seed, weights=weights,
                            calibrated=calibrated, views=OWN_VIEWS, error="raw")
    out = [pd.DataFrame({"r": [], "s": [], "beyond": []}) for _ in contexts]
    for (i, *_, yb), p in zip(cuts, preds):
        out[i] = held_out_errors(p, yb)
    return out


def predictive(x_ctx, y_ctx, x_query, seed: int = 0, weights=None, calibrated: bool = True,
               views: int = DEFAULT_VIEWS, error="default", own_errors: bool = True) -> Predictive:
    """Predictive distribution of observed y at ``x_query`` given context runs ``(x_ctx, y_ctx)`` (the arguments
    of :func:`predictive_many`)."""
    return predictive_many([(x_ctx, y_ctx, x_query)], seed=seed, weights=weights, calibrated=calibrated,
                           views=views, error=error, own_errors=own_errors)[0]


# ------------------------------------------------------------------------------------------------------
# Runs in, Bands out


def _check_one_curve(cur, frame_q, x: str, g, group) -> None:
    """Warnings for what the PFN cannot see: several curves in one table (repeated x: ``group=`` missing), and
    queries below the smallest run (it extrapolates toward larger x; backwards its bands are not checked)."""
    where = "" if g is None else f" (group {g!r})"
    xs = cur["x"].to_numpy(float)
    if group is None and len(np.unique(xs)) <= len(xs) / 2:
        warnings.warn(f"the runs repeat x values ({len(xs)} runs at {len(np.unique(xs))} distinct {x}): is this "
                      f"several curves in one table (model sizes, seeds)? The PFN reads it as one curve; pass "
                      f"group=<column> (CLI --group) to predict each", UserWarning, stacklevel=3)
    below = frame_q["x"].to_numpy(float) < xs.min()
    if below.any():
        warnings.warn(f"{int(below.sum())} query point(s) lie below the smallest run's {x} ({xs.min():.4g}){where}: "
                      "the PFN is trained to extrapolate toward larger x, so bands there are not checked",
                      UserWarning, stacklevel=3)


SIZE_COLUMNS = ("N", "params", "n_params", "parameters", "model_size", "size")  # model-size columns, by name


def _check_sizes(df, x: str, y: str, group) -> None:
    """Warn when, with no ``group=``, a model-size column (:data:`SIZE_COLUMNS`) other than x takes several
    values: several models' curves in one table, which the PFN would read as one curve."""
    if group is not None:
        return
    for col in SIZE_COLUMNS:
        if col in df.columns and col not in (x, y) and df[col].nunique() > 1:
            warnings.warn(f"column {col!r} takes {df[col].nunique()} values: several model sizes' curves in one "
                          f"table? The PFN reads it as one curve; pass group={col!r} (CLI --group {col}) to predict "
                          "each", UserWarning, stacklevel=3)
            return


def predict(runs, x: str = "x", y: str = "y", at=None, levels=DEFAULT_LEVELS, group: str | None = None,
            seed: int = 0, weights=None, calibrated: bool = True, views: int = DEFAULT_VIEWS, error="default"):
    """PFN posterior predictive bands for new runs at ``at``, from the runs in ``runs`` (one input x).

    Same :class:`bayescale.Bands` as a NUTS fit (``method="pfn"``): ``run_*`` are the predictive of an observed
    run; ``curve_*`` repeat them (see the ``curve_note`` attribute); ``extrapolation``/``beyond`` measure the
    distance outside the runs' x range in decades. With ``group=``, a dict group -> Bands (one batched call).
    ``calibrated=False``: the raw network's predictive, without the recalibration map; ``views``: thinnings of a
    long context to mix; ``error``: the extrapolation error of real curves, ``"raw"`` for none
    (:func:`predictive_many`).
    """
    if at is None:
        raise RunTableError("pass at= (the x values to predict), e.g. at=[1e9, 1e10] or at='x=1e9;1e10'")
    levels = tuple(check_levels(levels))
    df = read_runs(runs)
    if not isinstance(x, str):
        raise RunTableError("the PFN supports one input x (a column name); two-input laws (N and D) are not supported")
    rd = prepare_runs(df, RUN_TABLE, y=y, x=x, group=group)  # columns, NaN, x > 0, y > 0, MIN_CONTEXT distinct x
    _check_sizes(df, x, y, group)
    frame_q = query_points(RUN_TABLE, at, rd.columns)
    groups = rd.groups
    curves, scales = [], []
    for g in groups:
        cur = rd.curve(g)
        _check_one_curve(cur, frame_q, x, g, group)
        curves.append((cur["x"].to_numpy(), cur["y"].to_numpy(), frame_q["x"].to_numpy()))
        scales.append(scales_for(RUN_TABLE, cur))
    preds = predictive_many(curves, seed=seed, weights=weights, calibrated=calibrated, views=views, error=error)
    qs = [p for ends in interval_probs(levels) for p in ends]  # lower ends, then upper ends
    info = load(weights).info
    out = {}
    for g, pr, sc in zip(groups, preds, scales):
        qv = pr.quantile(np.array(qs))
        k = len(levels)
        frame = frame_q.copy()
        bands = make_bands_from_quantiles(frame, pr.median(), pr.mean(), qv[:k], qv[k:], levels,
                                          beyond=distance_beyond(RUN_TABLE, frame, sc), law="pfn", method="pfn", y=y,
                                          columns=rd.columns, curve_note=CURVE_NOTE)
        how = "recalibrated" if pr.calibrated else "raw network"
        bands.data.attrs["pfn_weights"] = (f"{info.get('config_name', '?')} step {info.get('step', '?')} sha256 "
                                           f"{info['sha256'][:12]}, {how}")
        bands.data.attrs["extrapolation_error"] = pr.error_note
        if g is not None:
            bands.data.attrs["group"] = str(g)
        out[g] = bands
    return out if group is not None else out[None]
