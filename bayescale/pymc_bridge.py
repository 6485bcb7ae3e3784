"""Fit a model written in PyMC and get bayescale's diagnostics, bands, LOO and plots for it: :func:`fit_pymc`.

The model is sampled with PyMC's NumPyro route (``pm.sample(..., nuts_sampler="numpyro")``) and the result is a
:class:`PyMCFit`, a :class:`bayescale.Fit` whose predictions go through ``pm.set_data`` and
``pm.sample_posterior_predictive`` instead of a registered law.

The model must follow three conventions::

    with pm.Model() as model:
        N = pm.Data("N", runs["params"])                # every input is a pm.Data container
        D = pm.Data("D", runs["tokens"])
        E = pm.HalfNormal("E", 2.0)                      # free parameters: scalar random variables
        ...
        sigma = pm.HalfNormal("sigma", 0.1)              # the noise scale is a parameter like any other
        mu = pm.Deterministic("mu", E + ...)             # the mean curve is a Deterministic named "mu"
        pm.LogNormal("y", pm.math.log(mu), sigma,        # the observed variable is named "y" ...
                     observed=runs["loss"], shape=mu.shape)   # ... and takes its shape from mu

    fit = bayescale.fit_pymc(model, inputs=["N", "D"])
    fit.diagnostics, fit.ok, fit.loo(), fit.predict({"N": [7e10], "D": [1.4e12]})

``shape=mu.shape`` on the observed variable is what lets ``pm.set_data`` change the number of points at
prediction time (without it the observed variable keeps the training length); :func:`fit_pymc` checks this
before sampling. PyMC is an optional dependency: ``pip install 'bayescale[pymc]'``.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import jax

import numpy as np
import pandas as pd
import xarray as xr

from bayescale.errors import BayescaleError
from bayescale.fit import Fit
from bayescale.posterior import Component, PosteriorDraws
from bayescale.sampler import SamplerSettings
from bayescale.laws import Input, external_law
from bayescale.runs import query_points, scales_for

__all__ = ["PyMCFit", "fit_pymc"]


def _import_pymc():
    try:
        import pymc as pm
    except ImportError as exc:
        raise ImportError("fit_pymc needs PyMC, an optional dependency of bayescale: pip install 'bayescale[pymc]'") from exc
    return pm


class PyMCFit(Fit):
    """A :class:`bayescale.Fit` of a PyMC model (see :func:`fit_pymc`).

    Diagnostics, ``ok``, ``warnings``, ``summary``, ``loo``, ``predict`` and ``plot`` behave as for native fits.
    Extra attributes: ``model`` (the PyMC model), ``mu_name`` and ``y_name`` (full variable names) and
    ``data_names`` (law input name -> ``pm.Data`` name).
    """

    def __init__(self, *args, model, mu_name: str, y_name: str, data_names: dict, free_names: list, **kw):
        super().__init__(*args, **kw)
        self.model, self.mu_name, self.y_name = model, mu_name, y_name
        self.data_names, self._free_names = dict(data_names), list(free_names)

    @property
    def param_names(self) -> list[str]:
        """The model's free random variables (the noise scale included, under the model's own name)."""
        return list(self._free_names)

    def posterior_draws(self, max_draws: int | None = 4000, seed: int = 0, discrepancy=None) -> PosteriorDraws:
        """Draws whose mean curve and new runs come from PyMC (:class:`PyMCComponent`); the extrapolation error
        ``discrepancy`` (default: the fit's ``tau``) is applied by :mod:`bayescale.posterior` as for native fits."""
        params = self.draws(max_draws)
        comp = PyMCComponent(self.law, params, self.scales, "pymc", float("nan"), fit=self, seed=seed,
                             **self.error_draws(len(next(iter(params.values()))), seed, discrepancy))
        return PosteriorDraws([comp], source=self.law.name)

    def own_errors(self, holdout: float = 0.25):
        """None here: leave-future-out needs refits, and bayescale cannot refit a user's PyMC model, so its error is
        the corpus prior alone."""
        return pd.DataFrame(columns=["r", "s", "beyond", "block"]), "not available for a PyMC model"

    @property
    def noise_level(self) -> float:
        """Typical noise in ln units: the sd of ln y around the posterior median curve at the runs."""
        mu = self.posterior_draws(500, seed=0, discrepancy=0.0).mean(self.runs)
        return float(np.std(np.log(self.runs["y"].to_numpy(float)) - np.log(np.median(mu, axis=0)), ddof=1))

    refittable = False  # a PyMC model's data and priors are the user's: it cannot be refitted to other runs

    def refit(self, runs, seed=None, law=None, **over):
        raise BayescaleError("a PyMC fit cannot be refitted to other runs by bayescale (rebuild the PyMC model on "
                             "them); leave-future-out needs refits: compare it with ic='loo'")

    def save(self, path):
        raise NotImplementedError("saving a PyMCFit is not supported (it would need the PyMC model to predict again); "
                                  "save the posterior with fit.idata.to_netcdf(path) and refit or rebuild the model")


@dataclass
class PyMCComponent(Component):
    """Posterior draws of a PyMC model: the mean curve is its ``mu`` Deterministic and a new run its observed
    variable, both sampled by ``pm.sample_posterior_predictive`` at the query points (one joint sample per draw,
    so :meth:`observe` scales the sampled run by the same extrapolation error as the curve)."""

    fit: PyMCFit | None = None
    seed: int = 0
    _last: tuple | None = None

    @property
    def size(self) -> int:
        return len(next(iter(self.params.values())))

    def mean(self, values: dict, paired: bool = False) -> np.ndarray:
        if paired:
            raise BayescaleError("a PyMC fit's mean curve is sampled at fixed query points; per-draw points (e.g. "
                                 "compute-optimal allocation) need a registered law")
        pm = _import_pymc()
        f = self.fit
        n_draws, n_points = self.size, len(next(iter(values.values())))
        trace = xr.Dataset({k: (("chain", "draw"), v[None]) for k, v in self.params.items()},
                           coords={"chain": [0], "draw": np.arange(n_draws)})
        new = {f.data_names[k]: np.asarray(values[k], float) for k in f.law.input_names}
        with _data_set_to(pm, f.model, new), _quiet_pymc():
            pp = pm.sample_posterior_predictive(trace, model=f.model, var_names=[f.mu_name, f.y_name],
                                                predictions=True, random_seed=self.seed, progressbar=False)
        group = pp["predictions"]
        mu = np.asarray(group[f.mu_name].values, float).reshape(n_draws, n_points)
        self._last = (mu, np.asarray(group[f.y_name].values, float).reshape(n_draws, n_points))
        return mu

    def observe(self, mu: np.ndarray, seed, idx=None, **errors) -> np.ndarray:
        if self._last is None or errors.get("extra") is not None:
            raise BayescaleError("a PyMC fit's new runs come with its mean curve (PosteriorDraws.predictive)")
        mu0, y0 = self._last
        idx = slice(None) if idx is None else idx
        return y0[idx] * mu / mu0[idx]

    def logpdf(self, y, mu, idx=None, **errors):
        raise BayescaleError("log densities of a PyMC fit's new runs are not available (its noise model lives in "
                             "PyMC); score its bands instead")


@contextlib.contextmanager
def _data_set_to(pm, model, new: dict):
    """Temporarily give the model's ``pm.Data`` containers new values, restoring the training values after."""
    old = {k: model[k].get_value() for k in new}
    try:
        pm.set_data(new, model=model)
        yield
    finally:
        pm.set_data(old, model=model)


@contextlib.contextmanager
def _quiet_pymc():
    """Silence PyMC's INFO log lines (e.g. "Sampling: [y]") for the duration."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _resolve(model, name: str, kind: str, allowed: list) -> str:
    """Full name of variable ``name`` (named models prefix it with ``model::``), checking it is of ``kind``."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} must be given by name (a string), got {type(name).__name__}")
    full = {v.name for v in allowed}
    if name not in model:
        raise ValueError(f"the PyMC model has no variable {name!r} (the {kind}); its variables are "
                         f"{list(model.named_vars)}")
    var = model[name]
    if var.name not in full:
        raise ValueError(f"variable {name!r} must be the {kind}; the model's candidates are {sorted(full)}")
    return var.name


def fit_pymc(model, *, inputs, y: str = "y", mu: str = "mu", chains: int = 4, warmup: int = 1000,
             samples: int = 1000, seed: int = 0, progress: bool = False, target_accept: float = 0.9,
             **nuts) -> PyMCFit:
    """Sample a PyMC model with NumPyro NUTS and return a :class:`PyMCFit` (bayescale diagnostics and bands).

    ``inputs``: the ``pm.Data`` containers holding the inputs, as a list of names (``["N", "D"]``) or a dict
    input name -> container name (``{"N": "params"}``); the input names are those ``predict(at=...)`` and the
    bands use (the container names are accepted in ``at`` too). ``mu``: the ``pm.Deterministic`` of the mean
    curve. ``y``: the observed random variable, which must be declared with ``shape=mu.shape`` so that predictions
    can change the number of points. Every free random variable must be a scalar; all of them (the noise scale
    included) are the fit's parameters for diagnostics. Inputs whose values are all > 0 are treated as log-scale
    (distances beyond the data in decades), others as linear.

    Keywords beyond ``target_accept`` go to NumPyro's NUTS through ``pm.sample(nuts={...})``, e.g.
    ``max_tree_depth=12``, ``dense_mass=True`` or ``chain_method="vectorized"`` (the default on GPU;
    ``"sequential"`` on CPU). The log-likelihood of ``y`` is stored for :meth:`Fit.loo` and
    :func:`bayescale.compare` (which needs the observed variable to be named ``"y"``).
    """
    pm = _import_pymc()
    if not isinstance(model, pm.Model):
        raise TypeError(f"fit_pymc expects a pymc.Model, got {type(model).__name__}")
    if isinstance(inputs, str):
        inputs = [inputs]
    mapping = dict(inputs) if isinstance(inputs, dict) else {str(k): k for k in inputs}
    if not mapping:
        raise ValueError("inputs= must name at least one pm.Data container, e.g. inputs=['N']")
    data_names = {k: _resolve(model, v, "input (a pm.Data container)", model.data_vars) for k, v in mapping.items()}
    mu_name = _resolve(model, mu, "mean curve (a pm.Deterministic)", model.deterministics)
    y_name = _resolve(model, y, "observed random variable", model.observed_RVs)
    free = list(model.free_RVs)
    bad = [v.name for v in free if v.type.ndim != 0]
    if bad:
        raise ValueError(f"fit_pymc supports scalar free random variables only; {bad} are not scalars")
    free_names = [v.name for v in free]

    values = {k: np.asarray(model[v].get_value(), float) for k, v in data_names.items()}
    obs_value = model.rvs_to_values[model[y_name]]
    y_obs = np.asarray(obs_value.get_value() if hasattr(obs_value, "get_value") else obs_value.data, float)
    n = y_obs.size
    for k, v in values.items():
        if v.ndim != 1 or v.size != n or y_obs.ndim != 1:
            raise ValueError(f"input {k!r} has shape {v.shape} and the observed {y!r} has shape {y_obs.shape}; "
                             "both must be 1-d with one value per run")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"input {k!r} has NaN or infinite values")
    # Predictions change the number of points with pm.set_data: y must follow mu's length.
    with _data_set_to(pm, model, {data_names[k]: np.concatenate([v, v[:1]]) for k, v in values.items()}):
        n_mu, n_y = (int(np.prod(model[name].shape.eval())) for name in (mu_name, y_name))
    if n_mu != n + 1 or n_y != n + 1:
        raise ValueError(f"with one more input point, {mu!r} has {n_mu} and {y!r} has {n_y} values instead of {n + 1}: "
                         f"{mu!r} must be computed from the pm.Data inputs and the observed variable declared with "
                         f"shape={mu}.shape (e.g. pm.Normal({y!r}, mu, sigma, observed=..., shape=mu.shape))")

    settings = SamplerSettings.for_law(None, chains, warmup, samples, target_accept=target_accept,
                         **{k: nuts[k] for k in ("max_tree_depth", "dense_mass") if k in nuts})
    # One CPU device: chains one after another is quicker than NumPyro's vmapped chains (every chain waits for
    # the longest trajectory); on an accelerator the vmapped chains share it.
    chain_method = "sequential" if jax.default_backend() == "cpu" else "vectorized"
    idata = pm.sample(draws=samples, tune=warmup, chains=chains, random_seed=seed, nuts_sampler="numpyro",
                      model=model, progressbar=progress, quiet=not progress, compute_convergence_checks=False,
                      nuts={"chain_method": chain_method, "target_accept": target_accept, **nuts})
    idata = pm.compute_log_likelihood(idata, var_names=[y_name], model=model, progressbar=False)

    runs = pd.DataFrame({**values, "y": y_obs})
    ins = tuple(Input(k, description=f"pm.Data {data_names[k]!r}", scale="log" if np.all(values[k] > 0) else "linear")
                for k in data_names)
    law = external_law(f"pymc:{model.name or 'model'}", f"{y} ~ PyMC model (mean {mu})", ins, free_names,
                       "a PyMC model fitted with bayescale.fit_pymc")
    columns = {**mapping, "y": y}
    return PyMCFit(law, idata, scales_for(law, runs), runs, columns, "pymc", float("nan"), seed, settings,
                   model=model, mu_name=mu_name, y_name=y_name, data_names=data_names, free_names=free_names)
