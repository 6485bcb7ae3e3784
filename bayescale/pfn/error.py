"""The PFN's extrapolation error on real curves: the corpus error model of :mod:`bayescale.error_model`, for the PFN.

The network is calibrated on curves of its synthetic prior; real curves stray further from what it predicts the
further it extrapolates. As for a fitted law, that error is a bend of the curve beyond the context::

    ln y = ln y_PFN + tau b^gamma z,   z ~ Normal(0, 1),   b = decades of x beyond the context (0 inside)

with ``tau`` drawn from an :class:`~bayescale.error_model.ErrorModel` learned on the PFN's own held-out errors on
real curves (family ``"pfn"``; ``ln tau`` may depend on the decades the context spans and on its noise,
:func:`context_noise`). The predictive's marginal at each query is then a mixture over ``tau`` and ``z``
(:func:`spread`, a product quadrature), which :class:`bayescale.pfn.infer.Predictive` applies.

A curve's own runs inform its ``tau`` too (:meth:`~bayescale.error_model.ErrorModel.posterior`): the network also
predicts the later runs of its context from the earlier ones (:func:`split_context`, the context cut at its
:data:`OWN_CUT` quantile of ln x), and those errors update the corpus prior through ``kappa`` (how errors just
beyond a cut relate to errors further out), so that a curve the network extrapolates badly gets wider bands.

The shipped model (``error_model.json`` beside this module) was learned by ``python -m benchmarks.pfn_error --ship``
on the *fit splits* of the one-input public suites only (revisiting's four domains, ColPret, datablations,
multipower; each split cut into an earlier context and later targets by :func:`split_context`, and that context cut
again for the own errors), never on their held-out runs; that benchmark scores it leave-one-domain-out.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources

import numpy as np
import pandas as pd

from bayescale.error_model import ErrorModel, ExtrapolationError
from bayescale.pfn.prior import MIN_CONTEXT, RUN_TABLE
from bayescale.posterior import error_shift
from bayescale.runs import fitted_span, scales_for

__all__ = ["FAMILY", "OWN_CUT", "OWN_VIEWS", "context_noise", "curve_error", "default_error_model",
           "held_out_errors", "split_context", "spread"]

FAMILY = "pfn"
N_TAU, N_Z = 5, 8  # quadrature nodes over tau (equal-probability midpoints) and over z (Gauss-Hermite)
OWN_CUT = 0.7  # quantile of a context's ln x below which its runs predict the later ones (a curve's own errors)
OWN_MAX = 20  # most later runs scored, evenly spaced in ln x
OWN_VIEWS = 1  # context views of the network's pass over the earlier runs (one: it costs one more pass)


def split_context(x, y, cut: float = OWN_CUT, max_later: int = OWN_MAX) -> tuple[np.ndarray, np.ndarray] | None:
    """A context cut in two at its ``cut`` quantile of ln x: indices of the earlier runs (ln x at or below the
    quantile) and of at most ``max_later`` later runs (the nearest to points evenly spaced in ln x), or None when
    fewer than :data:`~bayescale.pfn.prior.MIN_CONTEXT` distinct x lie below or no run lies above."""
    lx = np.log(np.asarray(x, float))
    q = np.quantile(lx, cut)
    early, later = np.flatnonzero(lx <= q), np.flatnonzero(lx > q)
    if len(np.unique(lx[early])) < MIN_CONTEXT or len(later) == 0:
        return None
    if len(later) > max_later:
        grid = np.linspace(lx[later].min(), lx[later].max(), max_later)
        later = later[np.unique(np.abs(lx[later][None, :] - grid[:, None]).argmin(axis=1))]
    return early, later


def context_noise(y) -> float:
    """Run-to-run noise of ``ln y`` in a context sorted by x (ln units), model-free: the median absolute second
    difference of ``ln y`` scaled to a standard deviation (``1.4826 median|d2| / sqrt(6)``); NaN below 3 runs."""
    ly = np.log(np.asarray(y, float))
    if len(ly) < 3:
        return float("nan")
    return float(1.4826 * np.median(np.abs(np.diff(ly, 2))) / math.sqrt(6.0))


def curve_error(model: ErrorModel, x_ctx, y_ctx, own: pd.DataFrame | None = None) -> ExtrapolationError:
    """One curve's ``tau``: the corpus prior given its context's span in decades and its noise, updated with the
    curve's own errors ``own`` (:func:`held_out_errors` of the later runs of :func:`split_context`; None: the
    prior alone)."""
    order = np.argsort(x_ctx, kind="stable")
    x, y = np.asarray(x_ctx, float)[order], np.asarray(y_ctx, float)[order]
    span = fitted_span(RUN_TABLE, scales_for(RUN_TABLE, pd.DataFrame({"x": x, "y": y})))
    return model.posterior(FAMILY, span, context_noise(y), own,
                           method=f"PFN, its runs above the {OWN_CUT:.0%} quantile of ln x predicted from those below")


def spread(error: ExtrapolationError, beyond) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature of the error ``tau b^gamma z`` at queries ``beyond`` (m,) decades out: shifts of ln y (J, m) and
    weights (J,), J = :data:`N_TAU` x :data:`N_Z` (``N_Z`` for a fixed tau)."""
    b = np.asarray(beyond, float)
    if error.point is not None:
        taus = np.array([error.point])
    else:
        taus = error.quantile((np.arange(N_TAU) + 0.5) / N_TAU)
    z, wz = np.polynomial.hermite_e.hermegauss(N_Z)
    wz = wz / wz.sum()
    shifts = error_shift(taus[:, None, None], b[None, None, :], error.gamma, z[None, :, None]).reshape(-1, len(b))
    return shifts, np.repeat(wz[None, :] / len(taus), len(taus), axis=0).reshape(-1)


def held_out_errors(pred, y, beyond=None) -> pd.DataFrame:
    """Errors of a predictive at held-out runs ``y``: ``r`` (ln y minus the predicted mean of ln y), ``s`` (its sd)
    and ``beyond`` (decades), the rows :func:`bayescale.error_model.learn` reads."""
    m, s = pred.moments_ln()
    return pd.DataFrame({"r": np.log(np.asarray(y, float)) - m, "s": s,
                         "beyond": pred.beyond if beyond is None else beyond})


@lru_cache(maxsize=1)
def default_error_model() -> ErrorModel | None:
    """The shipped PFN error model (None if this installation has none)."""
    try:
        with resources.files("bayescale.pfn").joinpath("error_model.json").open() as fh:
            return ErrorModel.from_dict(json.load(fh))
    except FileNotFoundError:
        return None
