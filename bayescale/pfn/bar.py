"""The PFN's output: a full-support bar ("Riemann") distribution over normalised z (Müller et al. 2022).

One object serves the training loss (:mod:`bayescale.pfn.train`) and prediction (:mod:`bayescale.pfn.infer`).
``K`` bins between ``borders`` b_0 < ... < b_K, widths ``w_k = b_{k+1} - b_k``, bin probabilities ``p_k`` (the
softmax of the network's logits), cumulative ``C_k = p_0 + ... + p_{k-1}``. Inner bins are uniform; the first and
last bins are replaced by half-normal tails with scale equal to their width, so the density has full support:

- inner bin k: ``f(z) = p_k / w_k``, ``F(z) = C_k + p_k (z - b_k) / w_k``;
- below b_1: ``f(z) = p_0 sqrt(2/pi) / w_0 exp(-d^2/2)``, ``d = (b_1 - z) / w_0``, ``F(z) = p_0 erfc(d / sqrt 2)``;
- from b_{K-1} up: ``f(z) = p_{K-1} sqrt(2/pi) / w_{K-1} exp(-d^2/2)``, ``d = (z - b_{K-1}) / w_{K-1}``,
  ``F(z) = C_{K-1} + p_{K-1} erf(d / sqrt 2)``.

:meth:`BarDistribution.logpdf` runs on NumPy or JAX arrays, following ``borders`` (float32 JAX in training,
float64 NumPy at prediction); :meth:`~BarDistribution.cdf` and :meth:`~BarDistribution.quantile` are NumPy
(float64, SciPy's erf family).
"""

from __future__ import annotations

import math
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import erf, erfc, erfcinv, erfinv

__all__ = ["BarDistribution", "BarRows"]

HALF_LOG_2_OVER_PI = 0.5 * math.log(2.0 / math.pi)  # ln of the half-normal density's constant sqrt(2/pi)


def _ragged(first, count) -> tuple[np.ndarray, np.ndarray]:
    """Row r's ``count[r]`` consecutive integers from ``first[r]``, laid end to end: (row of each, the integer)."""
    r = np.repeat(np.arange(len(count)), count)
    return r, first[r] + np.arange(len(r)) - np.repeat(np.cumsum(count) - count, count)


class BarRows:
    """Bin probabilities ``p`` (m, K) of a :class:`BarDistribution`, with what is derived from them computed once,
    when first needed: cumulative sums ``cum`` (m, K + 1), and each inner bin's CDF as ``intercept + slope z``
    (flat, m K)."""

    def __init__(self, p: np.ndarray, bar: "BarDistribution"):
        self.p, self._bar = p, bar

    def __len__(self) -> int:
        return len(self.p)

    @cached_property
    def cum(self) -> np.ndarray:
        return self._bar.cumulative(self.p)

    @cached_property
    def slope(self) -> np.ndarray:
        return (self.p / self._bar.widths).ravel()

    @cached_property
    def intercept(self) -> np.ndarray:
        return (self.cum[:, :-1] - self.slope.reshape(self.p.shape) * self._bar.borders[:-1]).ravel()


class BarDistribution:
    """Bar distribution on ``borders`` (K + 1,), strictly increasing; K = ``n_bins``.

    Bin probabilities come per row: ``probs`` (m, K) for :meth:`cdf`/:meth:`quantile`, ``log_probs`` (..., K)
    (normalised, e.g. ``jax.nn.log_softmax(logits)``) for :meth:`logpdf`.
    """

    def __init__(self, borders):
        self.borders = borders if isinstance(borders, jax.Array) else np.asarray(borders, np.float64)
        self.xp = jnp if isinstance(self.borders, jax.Array) else np
        self.widths = self.borders[1:] - self.borders[:-1]
        self.n_bins = self.borders.shape[0] - 1

    def logpdf(self, log_probs, z):
        """ln f(z) for ``log_probs`` (..., K) and ``z`` broadcastable to (...); the training loss is its negative."""
        xp, b, w, k = self.xp, self.borders, self.widths, self.n_bins
        z = xp.broadcast_to(z, log_probs.shape[:-1])
        idx = xp.clip(xp.searchsorted(b, z, side="right") - 1, 0, k - 1)
        inner = xp.take_along_axis(log_probs, idx[..., None], axis=-1)[..., 0] - xp.log(w[idx])
        d_lo = xp.maximum(b[1] - z, 0.0) / w[0]
        d_hi = xp.maximum(z - b[-2], 0.0) / w[-1]
        left = log_probs[..., 0] + HALF_LOG_2_OVER_PI - xp.log(w[0]) - 0.5 * d_lo**2
        right = log_probs[..., -1] + HALF_LOG_2_OVER_PI - xp.log(w[-1]) - 0.5 * d_hi**2
        return xp.where(z < b[1], left, xp.where(z >= b[-2], right, inner))

    @staticmethod
    def cumulative(probs) -> np.ndarray:
        """``C`` (m, K + 1): probability below each border, ``C[:, 0] = 0``."""
        return np.concatenate([np.zeros((len(probs), 1)), np.cumsum(probs, axis=1)], axis=1)

    def prepare(self, probs) -> "BarRows":
        """``probs`` (m, K) with what :meth:`cdf`, :meth:`cdf_grid` and :meth:`quantile` derive from it, kept for
        a caller that evaluates the same rows many times."""
        return BarRows(np.asarray(probs, np.float64), self)

    def _rows(self, probs) -> "BarRows":
        return probs if isinstance(probs, BarRows) else self.prepare(probs)

    def cdf(self, probs, z) -> np.ndarray:
        """F(z) for ``probs`` (m, K) (or :meth:`prepare`'s rows) and ``z`` broadcastable to (..., m)."""
        rows = self._rows(probs)
        z = np.asarray(z, float)
        z = np.broadcast_to(z, np.broadcast_shapes(z.shape, (len(rows.p),)))
        return self._cdf_in(rows, z, np.searchsorted(self.borders, z, side="right") - 1, np.arange(len(rows.p)))

    def cdf_grid(self, probs, start, step, n: int, into=None) -> np.ndarray:
        """F on an even grid per row, ``z_i = start + i step`` for i < ``n`` (``start``, ``step`` > 0: (m,)), summed
        over the rows that share an output row ``into`` (m,) (default: each row its own) -> (rows out, n).

        Exact, as :meth:`cdf` at those points, in work proportional to the borders plus the output grid: between
        borders F is linear in i, so F(i) = F(0) + s_0 i + sum over the borders in (0, i] of (change of slope) x
        (i - border), the sums accumulated along the grid; the half-normal tails are added where points fall in
        them."""
        rows = self._rows(probs)
        b, w, k = self.borders, self.widths, self.n_bins
        m = len(rows.p)
        into = np.arange(m) if into is None else np.asarray(into, np.int64)
        n_out = int(into.max()) + 1
        a, c = np.asarray(start, float), np.asarray(step, float)
        bin0 = np.searchsorted(b, a, side="right") - 1                    # the bin of grid point 0
        kin = np.clip(bin0, 1, k - 2)                                     # (the tails' bins count as flat here)
        f0 = rows.cum[np.arange(m), kin] + rows.p[np.arange(m), kin] * np.clip((a - b[kin]) / w[kin], 0, 1)

        def slope(r, j):  # F's slope per grid step in bin j of row r: 0 in the tails' bins
            inner = (j >= 1) & (j <= k - 2)
            return np.where(inner, rows.p.ravel().take(r * k + np.clip(j, 0, k - 1)) * c[r] / w[np.clip(j, 0, k - 1)],
                            0.0)

        s0 = slope(np.arange(m), bin0)
        # the borders 1..K-1 on the grid's (0, n - 1], row by row: first, count
        first = np.clip(bin0 + 1, 1, k)
        count = np.clip(np.searchsorted(b, a + c * (n - 1), side="right"), 1, k) - first
        count = np.maximum(count, 0)
        r, j = _ragged(first, count)
        change = slope(r, j) - slope(r, j - 1)
        at = (b[j] - a[r]) / c[r]
        flat = into[r] * n + np.clip(np.ceil(at), 0, n - 1).astype(np.int64)
        size = n_out * n
        slope_sum = np.bincount(flat, change, size).reshape(n_out, n).cumsum(axis=1)
        offset_sum = np.bincount(flat, change * at, size).reshape(n_out, n).cumsum(axis=1)
        i = np.arange(n)
        out = (np.bincount(into, f0, n_out)[:, None] + np.bincount(into, s0, n_out)[:, None] * i
               + i * slope_sum - offset_sum)
        # the tails: F there (below b_1, from b_{K-1} up) less the flat part counted above (C_1, C_{K-1})
        n_lo = np.clip(np.ceil((b[1] - a) / c), 0, n).astype(np.int64)
        n_hi = n - np.clip(np.ceil((b[k - 1] - a) / c), 0, n).astype(np.int64)
        for count, first, edge in ((n_lo, np.zeros(m, np.int64), 1), (n_hi, n - n_hi, k - 1)):
            if count.any():
                r, pos = _ragged(first, count)
                z = a[r] + c[r] * pos
                val = self._cdf_in(rows, z, np.full(len(r), edge - 1), r) - rows.cum[r, edge]
                out += np.bincount(into[r] * n + pos, val, size).reshape(n_out, n)
        return out

    def _cdf_in(self, rows: "BarRows", z, idx, row) -> np.ndarray:
        """F(z) given each point's bin ``idx`` (borders at or below it, less one; clipped here) and row ``row``
        (broadcastable to ``z``): inner bins ``C_k + p_k (z - b_k) / w_k`` as intercept + slope z, the tails by
        their own formulas."""
        b, w, k = self.borders, self.widths, self.n_bins
        flat = np.clip(idx, 0, k - 1) + k * row
        out = rows.intercept.take(flat) + rows.slope.take(flat) * z
        lo, hi = z < b[1], z >= b[-2]  # the tails, computed where they apply only (erf is the costly part)
        if lo.any():
            r = np.broadcast_to(row, z.shape)[lo]
            out[lo] = rows.p[r, 0] * erfc((b[1] - z[lo]) / w[0] / math.sqrt(2))
        if hi.any():
            r = np.broadcast_to(row, z.shape)[hi]
            out[hi] = rows.cum[r, k - 1] + rows.p[r, -1] * erf((z[hi] - b[-2]) / w[-1] / math.sqrt(2))
        return out

    def quantile(self, probs, q) -> np.ndarray:
        """F^{-1}(q) for ``probs`` (m, K) (or :meth:`prepare`'s rows): levels ``q`` (n,) (the same for every row)
        or (n, m) in (0, 1) -> (n, m)."""
        b, w, k = self.borders, self.widths, self.n_bins
        rows = self._rows(probs)
        p, cum = rows.p, rows.cum
        q = np.asarray(q, float)
        q = q[:, None] if q.ndim == 1 else q  # (n, 1) or (n, m)
        # bin of each quantile: number of cumulative borders <= q (per row), by one search of the rows laid end to
        # end (row j's values shifted by 2j, above every level of row j - 1)
        off = 2.0 * np.arange(len(p))
        flat = (cum[:, 1:k] + off[:, None]).ravel()
        idx = np.searchsorted(flat, np.broadcast_to(q, (len(q), len(p))) + off, side="right")
        idx = np.clip(idx - (k - 1) * np.arange(len(p)), 0, k - 1)  # (n, m)
        rows = np.arange(len(p))[None, :]
        pk = np.maximum(p[rows, idx], 1e-300)
        inner = b[idx] + w[idx] * np.clip((q - cum[rows, idx]) / pk, 0, 1)
        p0, pl = np.maximum(p[:, 0], 1e-300)[None], np.maximum(p[:, -1], 1e-300)[None]
        left = b[1] - w[0] * math.sqrt(2) * erfcinv(np.clip(q / p0, 1e-300, 1.0))
        c_last = cum[:, k - 1][None]
        right = b[-2] + w[-1] * math.sqrt(2) * erfinv(np.clip((q - c_last) / pl, 0.0, 1 - 1e-16))
        return np.where(idx == 0, left, np.where(idx == k - 1, right, inner))
