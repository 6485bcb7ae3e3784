"""Compare law families on the same runs (ArviZ PSIS-LOO) and average them (stacking weights).

:func:`model_average` returns bands whose draws mix every family in proportion to its stacking weight, so they
carry the uncertainty about which law is right as well as each law's parameter uncertainty.
"""

from __future__ import annotations

import arviz_stats as azs
import numpy as np
import pandas as pd

from bayescale.bands import DEFAULT_LEVELS, bands_from_draws
from bayescale.posterior import PosteriorDraws, mixture
from bayescale.runs import query_points

__all__ = ["ModelAverage", "compare", "model_average"]


def _check_same_runs(fits: dict) -> None:
    if len(fits) < 2:
        raise ValueError("compare/model_average need at least two fits")
    names = list(fits)

    def observed(f):
        obs = f.idata["observed_data"]
        return next(iter(obs.data_vars.values())).values  # one observed variable, whatever its name

    ref = observed(fits[names[0]])
    for n in names[1:]:
        y = observed(fits[n])
        if y.shape != ref.shape or not np.allclose(y, ref):
            raise ValueError(f"fits {names[0]!r} and {n!r} were fitted to different runs; LOO can only compare fits "
                             "of the same runs (same rows, same y)")


def _check_same_inputs(fits: dict) -> None:
    names = list(fits)
    ref = tuple(fits[names[0]].law.input_names)
    for n in names[1:]:
        if tuple(fits[n].law.input_names) != ref:
            raise ValueError(f"fits {names[0]!r} and {n!r} have different inputs ({list(ref)} vs "
                             f"{list(fits[n].law.input_names)}); average laws of the same inputs")


def compare(fits: dict, method: str = "stacking") -> pd.DataFrame:
    """ArviZ ``compare`` of ``{name: Fit}``: elpd_loo, its standard error, p_loo, and the stacking ``weight``."""
    _check_same_runs(fits)
    return azs.compare({k: f.idata for k, f in fits.items()}, method=method, round_to="none")


class ModelAverage:
    """A weighted mixture of fits of different laws to the same runs."""

    def __init__(self, fits: dict, weights: dict, table: pd.DataFrame | None = None):
        self.fits, self.weights, self.table = fits, weights, table

    def __repr__(self) -> str:
        w = ", ".join(f"{k}={v:.2f}" for k, v in self.weights.items())
        return f"<ModelAverage {w}>"

    @property
    def law(self):
        """The law of the first family with weight (all share its inputs)."""
        return next(f.law for n, f in self.fits.items() if self.weights[n] > 0)

    @property
    def columns(self) -> dict:
        return next(iter(self.fits.values())).columns

    def posterior_draws(self, max_draws: int | None = 4000, seed: int = 0, resample: bool = True) -> PosteriorDraws:
        """The mixture's :class:`~bayescale.posterior.PosteriorDraws` (each family with its own extrapolation
        error): ``max_draws`` draws split among the families by their weights, or with ``resample=False`` each
        family's own ``max_draws`` draws and its weight (exact log densities; see
        :func:`bayescale.posterior.mixture`)."""
        names = [n for n in self.fits if self.weights[n] > 0]
        parts = [self.fits[n].posterior_draws(None if resample else max_draws) for n in names]
        return mixture(parts, [self.weights[n] for n in names], max_draws, seed,
                       source="average(" + ",".join(names) + ")", resample=resample)

    def predictive_draws(self, at, seed: int = 0, n_draws: int = 4000):
        """Draws of the mixture's mean curve and of a new run at ``at``: (query frame, two arrays (S, points))."""
        frame = query_points(self.law, at, self.columns)
        mu, obs = self.posterior_draws(n_draws, seed).predictive(frame, seed)
        return frame, mu, obs

    def log_predictive_density(self, at, observed, se=None, max_draws: int | None = 4000, seed: int = 0) -> np.ndarray:
        """Log density of ``observed`` at ``at`` under the mixture: ``log sum_k w_k p_k(y)`` per point, y units."""
        frame = query_points(self.law, at, self.columns)
        return self.posterior_draws(max_draws, seed, resample=False).log_density(frame, observed, se=se, seed=seed)

    def predict(self, at, levels=DEFAULT_LEVELS, seed: int = 0, n_draws: int = 4000):
        """Bands of the mixture (method ``"bma"``)."""
        return bands_from_draws(self.posterior_draws(n_draws, seed), query_points(self.law, at, self.columns), levels,
                                seed, method="bma", columns=self.columns,
                                law="+".join(f"{k}:{self.weights[k]:.2f}" for k in self.fits))


def model_average(fits: dict, method: str = "stacking") -> ModelAverage:
    """Average ``{name: Fit}`` with LOO stacking weights (``method="stacking"``) or pseudo-BMA weights."""
    _check_same_inputs(fits)
    table = compare(fits, method=method)
    weights = {k: float(table.loc[k, "weight"]) for k in fits}
    return ModelAverage(fits, weights, table)
