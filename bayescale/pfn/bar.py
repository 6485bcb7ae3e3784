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

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import erf, erfc, erfcinv, erfinv

__all__ = ["BarDistribution"]

HALF_LOG_2_OVER_PI = 0.5 * math.log(2.0 / math.pi)  # ln of the half-normal density's constant sqrt(2/pi)


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

    def cdf(self, probs, z) -> np.ndarray:
        """F(z) for ``probs`` (m, K) and ``z`` broadcastable to (..., m)."""
        b, w, k = self.borders, self.widths, self.n_bins
        p = np.asarray(probs, np.float64)
        cum = self.cumulative(p)
        z = np.asarray(z, float)
        z = np.broadcast_to(z, np.broadcast_shapes(z.shape, (len(p),)))
        rows = np.broadcast_to(np.arange(len(p)), z.shape)
        idx = np.clip(np.searchsorted(b, z, side="right") - 1, 0, k - 1)
        out = cum[rows, idx] + p[rows, idx] * np.clip((z - b[idx]) / w[idx], 0, 1)
        lo, hi = z < b[1], z >= b[-2]  # the tails, computed where they apply only (erf is the costly part)
        out[lo] = p[rows[lo], 0] * erfc((b[1] - z[lo]) / w[0] / math.sqrt(2))
        out[hi] = cum[rows[hi], k - 1] + p[rows[hi], -1] * erf((z[hi] - b[-2]) / w[-1] / math.sqrt(2))
        return out

    def quantile(self, probs, q) -> np.ndarray:
        """F^{-1}(q) for ``probs`` (m, K): levels ``q`` (n,) (the same for every row) or (n, m) in (0, 1) -> (n, m)."""
        b, w, k = self.borders, self.widths, self.n_bins
        p = np.asarray(probs, np.float64)
        cum = self.cumulative(p)
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
