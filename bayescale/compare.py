"""Compare law families on the same runs (ArviZ PSIS-LOO) and average them (stacking weights).

:func:`model_average` returns bands whose draws mix every family in proportion to its stacking weight, so they
carry the uncertainty about which law is right as well as each law's parameter uncertainty.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayescale.bands import make_bands
from bayescale.fit import DEFAULT_LEVELS, Fit

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
    import arviz as az

    _check_same_runs(fits)
    return az.compare({k: f.idata for k, f in fits.items()}, method=method, round_to="none")


class ModelAverage:
    """A weighted mixture of fits of different laws to the same runs."""

    def __init__(self, fits: dict, weights: dict, table: pd.DataFrame | None = None):
        self.fits, self.weights, self.table = fits, weights, table

    def __repr__(self) -> str:
        w = ", ".join(f"{k}={v:.2f}" for k, v in self.weights.items())
        return f"<ModelAverage {w}>"

    def predictive_draws(self, at, seed: int = 0, n_draws: int = 4000):
        rng = np.random.default_rng(seed)
        names = list(self.fits)
        w = np.array([self.weights[n] for n in names], float)
        counts = rng.multinomial(n_draws, w / w.sum())
        mus, obss, frame = [], [], None
        for n, c in zip(names, counts):
            if c == 0:
                continue
            fr, mu, obs = self.fits[n].predictive_draws(at, seed=seed)
            frame = fr if frame is None else frame
            idx = rng.choice(mu.shape[0], size=c, replace=c > mu.shape[0])
            mus.append(mu[idx])
            obss.append(obs[idx])
        return frame, np.concatenate(mus), np.concatenate(obss)

    def log_predictive_density(self, at, observed, se=None, max_draws: int | None = 4000) -> np.ndarray:
        """Log density of ``observed`` at ``at`` under the mixture: ``log sum_k w_k p_k(y)`` per point, y units."""
        from scipy.special import logsumexp

        names = [n for n in self.fits if self.weights[n] > 0]
        w = np.array([self.weights[n] for n in names], float)
        lp = np.stack([self.fits[n].log_predictive_density(at, observed, se=se, max_draws=max_draws) for n in names])
        return logsumexp(lp + np.log(w / w.sum())[:, None], axis=0)

    def predict(self, at, levels=DEFAULT_LEVELS, seed: int = 0, n_draws: int = 4000):
        """Bands of the mixture (method ``"bma"``)."""
        from bayescale.runs import distance_beyond

        frame, mu, obs = self.predictive_draws(at, seed=seed, n_draws=n_draws)
        first: Fit = next(f for n, f in self.fits.items() if self.weights[n] > 0)
        return make_bands(frame, mu, obs, levels, beyond=distance_beyond(first.law, frame, first.scales),
                          law="+".join(f"{k}:{self.weights[k]:.2f}" for k in self.fits), method="bma",
                          y=first.columns.get("y", "y"), columns=first.columns)


def model_average(fits: dict, method: str = "stacking") -> ModelAverage:
    """Average ``{name: Fit}`` with LOO stacking weights (``method="stacking"``) or pseudo-BMA weights."""
    _check_same_inputs(fits)
    table = compare(fits, method=method)
    weights = {k: float(table.loc[k, "weight"]) for k in fits}
    return ModelAverage(fits, weights, table)
