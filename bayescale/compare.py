"""Compare law families on the same runs and average them by stacking weights.

Users predict beyond their largest run, so families are scored by how they extrapolate: leave-future-out
(``ic="lfo"``, the default where every fit can be refitted): runs ordered by size, each of the largest ``holdout``
share predicted from the runs below it (ArviZ's ``lfo_cv``: one refit without them, then Pareto-smoothed importance
sampling forward, refitting where that fails; Bürkner, Gabry & Vehtari 2020), and the stacking weights come from
those log scores (ArviZ ``compare``). A family that fits the runs well but extrapolates badly loses weight, which
PSIS-LOO (``ic="loo"``: how well a family predicts a run like the ones it has) does not see.

:func:`model_average` returns bands whose draws mix every family in proportion to its weight, so they carry the
uncertainty about which law is right as well as each law's parameter uncertainty.
"""

from __future__ import annotations

import warnings

import arviz_stats as azs
import numpy as np
import pandas as pd
import xarray as xr
from arviz_base import from_dict
from arviz_stats import SamplingWrapper

from bayescale.bands import DEFAULT_LEVELS, bands_from_draws
from bayescale.posterior import PosteriorDraws, mixture
from bayescale.runs import query_points, run_size

__all__ = ["ICS", "ModelAverage", "RefitWrapper", "compare", "lfo", "model_average", "resolve_ic"]

ICS = ("auto", "lfo", "loo")


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


class RefitWrapper(SamplingWrapper):
    """ArviZ's refit protocol (``SamplingWrapper``) for a bayescale fit: observations are its runs ordered by size,
    the 'time' of leave-future-out; a refit is :meth:`bayescale.Fit.refit` on the runs kept."""

    def __init__(self, fit, order, seed: int):
        super().__init__(model=fit)
        self.fit, self.seed, self.refits = fit, seed, []
        self.runs = fit.runs.reset_index(drop=True).iloc[order].reset_index(drop=True)

    def sel_observations(self, idx):
        keep = np.ones(len(self.runs), bool)
        keep[np.asarray(idx, int)] = False
        return self.runs[keep], self.runs[~keep]

    def sample(self, modified_observed_data):
        self.refits.append(self.fit.refit(modified_observed_data, seed=self.seed + len(self.refits)))
        return self.refits[-1]

    def get_inference_data(self, fitted_model):
        return fitted_model.idata

    def log_likelihood__i(self, excluded_obs, idata__i):
        draws = self.refits[-1].posterior_draws(None)  # flat, chain-major: reshape back to (chain, draw)
        lp = draws.logpdf(excluded_obs["y"].to_numpy(float)[None, :], draws.mean(excluded_obs))
        n_chain = idata__i["posterior"].sizes["chain"]
        return xr.DataArray(lp.reshape(n_chain, -1, lp.shape[-1]), dims=("chain", "draw", "run"))


def _first_forecast(fits: dict, holdout: float) -> int:
    """The number of smallest runs every family is first refitted on: all but the largest ``holdout`` share, and
    at least what each law needs."""
    f0 = next(iter(fits.values()))
    n = len(f0.runs)
    need = max(f.law.needs_points for f in fits.values())
    start = max(n - max(1, int(round(holdout * n))), need)
    if start >= n:
        raise ValueError(f"leave-future-out needs more runs than the {n} given (law(s) need {need} to be refitted); "
                         "use ic='loo'")
    return start


def lfo(fit, min_observations: int, seed: int = 0, method: str = "approx"):
    """ArviZ ``lfo_cv`` of one fit: each run from ``min_observations`` on (by size) predicted from the runs below it.

    Parameters
    ----------
    fit : Fit
        A fit whose law can be refitted (:meth:`bayescale.Fit.refit`).
    min_observations : int
        How many of the smallest runs the first refit sees.
    seed : int
        Seed of the refits.
    method : {"approx", "exact"}
        ``"approx"``: one refit, then importance sampling forward (refitting where Pareto k > 0.7); ``"exact"``:
        a refit per run.

    Returns
    -------
    ELPDDataLFO
        ArviZ's result, pointwise (``elpd_i`` per predicted run), for :func:`arviz_stats.compare`.
    """
    order = np.argsort(run_size(fit.law, fit.runs.reset_index(drop=True)), kind="stable")
    ll = fit.idata["log_likelihood"]["y"].values[..., order]
    tree = from_dict({"posterior": {k: fit.idata["posterior"][k].values for k in fit.param_names},
                      "log_likelihood": {"y": ll}}, dims={"y": ["run"]})
    with warnings.catch_warnings():  # a refit's own Pareto-k notes; the refits are counted in the result
        warnings.simplefilter("ignore", UserWarning)
        return azs.lfo_cv(tree, RefitWrapper(fit, order, seed), min_observations=int(min_observations),
                          forecast_horizon=1, time_dim="run", pointwise=True, var_name="y", method=method)


def resolve_ic(fits: dict, ic: str) -> str:
    """The scores :func:`compare` uses: ``ic`` checked, ``"auto"`` resolved to lfo when every fit can be refitted."""
    if ic not in ICS:
        raise ValueError(f"ic must be one of {ICS}, got {ic!r}")
    if ic == "auto":
        return "lfo" if all(getattr(f, "refittable", False) for f in fits.values()) else "loo"
    return ic


def compare(fits: dict, method: str = "stacking", ic: str = "auto", holdout: float = 0.25,
            seed: int = 0) -> pd.DataFrame:
    """Compare ``{name: Fit}`` of the same runs with ArviZ ``compare``: elpd, its standard error, and the weights.

    Parameters
    ----------
    fits : dict
        Fits of different laws to the same runs.
    method : {"stacking", "BB-pseudo-BMA", "pseudo-BMA"}
        How ArviZ turns the pointwise scores into weights.
    ic : {"auto", "lfo", "loo"}
        ``"lfo"``: leave-future-out scores of the largest ``holdout`` share of the runs (see the module docstring);
        ``"loo"``: PSIS-LOO of every run; ``"auto"``: lfo when every fit can be refitted (native fits), else loo.
    holdout : float
        Share of the runs (the largest) that leave-future-out predicts.
    seed : int
        Seed of the leave-future-out refits.

    Returns
    -------
    pandas.DataFrame
        ArviZ's comparison table (one row per family, best first, ``weight`` column); ``attrs["ic"]`` says which
        scores were used.
    """
    _check_same_runs(fits)
    ic = resolve_ic(fits, ic)
    if ic == "loo":
        table = azs.compare({k: f.idata for k, f in fits.items()}, method=method, round_to="none")
    else:
        start = _first_forecast(fits, holdout)
        table = azs.compare({k: lfo(f, start, seed) for k, f in fits.items()}, method=method, round_to="none")
    table.attrs["ic"] = ic
    return table


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

    @property
    def runs(self):
        """The runs the families were fitted to (the same for all)."""
        return next(iter(self.fits.values())).runs

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


def model_average(fits: dict, method: str = "stacking", ic: str = "auto", holdout: float = 0.25,
                  seed: int = 0) -> ModelAverage:
    """Average ``{name: Fit}`` with the weights of :func:`compare` (by default stacking of leave-future-out scores:
    weight goes to the families that extrapolate the runs best)."""
    _check_same_inputs(fits)
    table = compare(fits, method=method, ic=ic, holdout=holdout, seed=seed)
    weights = {k: float(table.loc[k, "weight"]) for k in fits}
    return ModelAverage(fits, weights, table)
