"""Posterior draws: the one place that makes predictive draws, for every fitted thing and every consumer.

A :class:`PosteriorDraws` is a mixture of :class:`Component` s (one per law: a fit, or each family of a model
average, its draws in proportion to the family's weight). Bands (:meth:`bayescale.Fit.predict`), model averages,
compute-optimal allocation, next-run selection, risk reports and scoring all ask it for draws at query points
(a DataFrame or dict with one column per law input):

- :meth:`PosteriorDraws.mean`: the law's mean curve ``mu(x)`` per draw (parameter uncertainty only);
- :meth:`PosteriorDraws.curve`: the mean curve with the law's *extrapolation error*, applied here and nowhere else::

      mu'(x) = mu(x) * exp(tau * b(x)^gamma * z),    z ~ Normal(0, 1), one z per draw

  ``b`` the distance beyond the component's fitted runs (:func:`bayescale.runs.distance_beyond`: decades of the
  furthest log input or of the log inputs' geometric mean, 0 inside), ``tau`` its error in ln-units per
  decade^gamma, one value or one per draw (drawn from the fit's
  :class:`~bayescale.error_model.ExtrapolationError`, which mixes over the uncertain ``tau``; 0 for the raw
  posterior). One ``z`` per draw makes the error a smooth bend of the whole curve beyond the
  runs (the same sign at every point), so joint quantities (P(option A beats B), an optimum over N) see it too;
- :meth:`PosteriorDraws.predictive`: that curve and a new observed run there (noise model: :mod:`bayescale.noise`);
- :meth:`PosteriorDraws.log_density`: ``log sum_k w_k mean_s p_k(y | draw s)`` of observed runs.

Fitted objects provide ``posterior_draws(max_draws, seed)``; :func:`posterior_draws` calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import jax
import numpy as np
import pandas as pd
from scipy.special import logsumexp

from bayescale.errors import BayescaleError, SettingError
from bayescale.laws import Law, Scales, get_law
from bayescale.model import pad_length
from bayescale.noise import DEFAULT, log_prob, sample
from bayescale.runs import distance_beyond, transform_inputs
from bayescale.scoring import log_mean_exp

__all__ = ["Component", "PosteriorDraws", "check_tau", "error_shift", "law_draws", "mixture", "posterior_draws", "thin"]


def error_shift(tau, beyond, gamma: float, z):
    """The extrapolation error's shift of ln y, ``tau * beyond^gamma * z`` (arguments broadcast; ``beyond`` in
    decades, ``tau`` in ln-units per decade^gamma, ``z`` standard normal): the one formula, for draws here and for
    the PFN's quadrature (:func:`bayescale.pfn.error.spread`)."""
    return tau * np.asarray(beyond, float) ** gamma * z


def check_tau(tau) -> float:
    """``tau`` as a float if it is a finite number >= 0 (ln-units per decade), else a clear error."""
    try:
        t = float(tau)
    except (TypeError, ValueError):
        t = float("nan")
    if not (np.isfinite(t) and t >= 0):
        raise SettingError(f"the extrapolation error tau must be a finite number >= 0 (ln-units per decade), got {tau!r}")
    return t


def thin(draws: dict, max_draws: int | None) -> dict:
    """At most ``max_draws`` of the flat draws ``{name: (S, ...)}``, evenly spaced (deterministic)."""
    n = len(next(iter(draws.values())))
    if max_draws is None or n <= max_draws:
        return draws
    idx = np.linspace(0, n - 1, max_draws).round().astype(int)
    return {k: v[idx] for k, v in draws.items()}


def _mean_impl(law, p, t):
    return law.mean(p, t)


_mean_jit = jax.jit(_mean_impl, static_argnums=0)


def _pad(a: np.ndarray, rows: int, width: int) -> np.ndarray:
    """A 2-d array padded to ``rows`` x ``width`` with its last row and column repeated."""
    return np.pad(a, ((0, rows - a.shape[0]), (0, width - a.shape[1])), mode="edge")


def _values(law: Law, at) -> dict:
    if isinstance(at, dict):
        return {k: np.asarray(at[k], float) for k in law.input_names}
    return {k: at[k].to_numpy(float) for k in law.input_names}


@dataclass
class Component:
    """Draws of one law: ``params`` (name -> (S,), centred parametrisation, plus ``sigma``), the ``scales`` of the
    runs it was fitted to, its noise model and its extrapolation error ``tau`` (ln-units per decade)."""

    law: Law
    params: dict
    scales: Scales
    likelihood: str = DEFAULT
    df: float = 4.0
    tau: float | np.ndarray = 0.0  # one value, or one per draw (S,)
    weight: float = 1.0
    gamma: float = 1.0
    error_note: str = ""  # how the extrapolation error was obtained (recorded by bands and reports)

    @property
    def tau_median(self) -> float:
        return float(np.median(self.tau))

    @property
    def tau_rms(self) -> float:
        """``sqrt(mean tau^2)``: one scale for the whole error (next-run selection's candidate error)."""
        return float(np.sqrt(np.mean(np.square(self.tau))))

    @property
    def size(self) -> int:
        return len(self.params["sigma"])

    def mean(self, values: dict, paired: bool = False) -> np.ndarray:
        """Mean curve (S, ...) at ``values`` (name -> array, natural units): every draw at every point, or with
        ``paired`` the inputs carry a leading draw axis (S, ...) and draw s is evaluated at its own points."""
        t = transform_inputs(self.law, values, self.scales.center)
        shape = np.broadcast_shapes(*(a.shape for a in t.values()))
        points = shape[1:] if paired else shape
        n, size = math.prod(points), self.size
        if n == 0:
            return np.zeros((size, *points))
        # draws and points padded to a few lengths (their last values repeated), so that one compiled program serves
        # predictions of many shapes (a compile per shape was most of a quick prediction's time)
        rows, width = pad_length(size), pad_length(n)
        lead = size if paired else 1
        t = {k: _pad(np.broadcast_to(v, (lead, *points)).reshape(lead, n), rows if paired else 1, width)
             for k, v in t.items()}
        p = {k: _pad(np.asarray(v, float).reshape(size, 1), rows, 1) for k, v in self.params.items() if k != "sigma"}
        return np.asarray(_mean_jit(self.law, p, t))[:size, :n].reshape(size, *points)

    def beyond(self, values: dict) -> np.ndarray:
        """Distance beyond the fitted runs (decades, :func:`bayescale.runs.distance_beyond`; 0 inside), any array shape."""
        shape = np.broadcast_shapes(*(np.shape(v) for v in values.values()))
        flat = pd.DataFrame({k: np.broadcast_to(v, shape).reshape(-1) for k, v in values.items()})
        return distance_beyond(self.law, flat, self.scales).reshape(shape)

    def curve(self, values: dict, z: np.ndarray, paired: bool = False) -> np.ndarray:
        """Mean curve times the extrapolation error ``exp(tau b^gamma z)``; ``z`` (S,) one standard normal per
        draw."""
        mu = self.mean(values, paired)
        if not np.any(self.tau):
            return mu
        b = self.beyond(values)
        per_draw = (-1,) + (1,) * (mu.ndim - 1)
        z = np.asarray(z, float).reshape(per_draw)
        tau = np.asarray(self.tau, float)
        tau = tau.reshape(per_draw) if tau.ndim else tau
        return mu * np.exp(error_shift(tau, b if paired else b[None], self.gamma, z))

    def sigma_of(self, idx=None, ndim: int = 2) -> np.ndarray:
        s = np.asarray(self.params["sigma"], float)
        s = s if idx is None else s[idx]
        return s.reshape((-1,) + (1,) * (ndim - 1))

    def observe(self, mu: np.ndarray, seed, idx=None, **errors) -> np.ndarray:
        """A new observed run per element of ``mu`` (S, ...) (its draws ``idx`` of this component)."""
        return sample(self.likelihood, mu, self.sigma_of(idx, mu.ndim), seed, self.df, **errors)

    def logpdf(self, y, mu: np.ndarray, idx=None, **errors) -> np.ndarray:
        """``log p(y | draw)`` (S, ...) given the draws' mean ``mu``; ``y`` broadcasts against ``mu``."""
        return log_prob(self.likelihood, y, mu, self.sigma_of(idx, mu.ndim), self.df, **errors)


@dataclass
class PosteriorDraws:
    """Flat posterior draws of a fit or a mixture of fits; see the module docstring. Draw ``s`` of the mixture is
    draw ``s - start_k`` of component ``k``; a component's ``weight`` is its share in the mixture."""

    components: list = field(default_factory=list)
    source: str = ""
    weighted: bool = False  # each component keeps its own draws: only log_density mixes them (by weight)

    def __post_init__(self):
        if not self.components:
            raise BayescaleError("posterior draws need at least one component")

    def _flat(self):
        if self.weighted:
            raise BayescaleError("these draws keep each family's own draws with its weight, which only "
                                 "log_density can mix; build them with mixture(..., resample=True) for flat draws")

    @property
    def size(self) -> int:
        return sum(c.size for c in self.components)

    @property
    def law(self) -> Law:
        """The first component's law (all components share its inputs)."""
        return self.components[0].law

    @property
    def law_names(self) -> list[str]:
        return [c.law.name for c in self.components]

    @property
    def input_names(self) -> tuple:
        return self.law.input_names

    @property
    def sigma(self) -> np.ndarray:
        return np.concatenate([np.asarray(c.params["sigma"], float) for c in self.components])

    def parts(self):
        """(component, slice of its draws in the flat draws) for each component."""
        start = 0
        for c in self.components:
            yield c, slice(start, start + c.size)
            start += c.size

    def mean(self, at) -> np.ndarray:
        """(S, P): the law's mean curve per draw, without the extrapolation error."""
        self._flat()
        vals = _values(self.law, at)
        return np.concatenate([c.mean(vals) for c in self.components], axis=0)

    def error_z(self, seed) -> np.ndarray:
        """(S,): the standard normal of each draw's extrapolation error (:meth:`curve`), from ``seed``."""
        return np.random.default_rng(seed).standard_normal(self.size)

    def curve(self, at, seed=None, z=None) -> np.ndarray:
        """(S, P): mean curve with the extrapolation error (``z`` (S,) or drawn from ``seed``)."""
        self._flat()
        return self._curve(_values(self.law, at), self.error_z(seed) if z is None else np.asarray(z, float))

    def _curve(self, vals: dict, z: np.ndarray) -> np.ndarray:
        return np.concatenate([c.curve(vals, z[sl]) for c, sl in self.parts()], axis=0)

    def predictive(self, at, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(curve, new runs), each (S, P): the curve with its extrapolation error and a new observed run there."""
        rng = np.random.default_rng(seed)
        mu = self.curve(at, z=rng.standard_normal(self.size))
        return mu, self.observe(mu, rng)

    def observe(self, mu: np.ndarray, seed, idx=None, extra=None) -> np.ndarray:
        """New runs given the draws' curve ``mu``: all draws (S, ...), or the draws ``idx`` (R,) with ``mu`` (R, ...).
        ``extra``: a relative error (ln units) in quadrature with the noise."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        out = np.empty_like(mu)
        idx = np.arange(self.size) if idx is None else np.asarray(idx, int)
        for c, sl in self.parts():
            sel = (idx >= sl.start) & (idx < sl.stop)
            if sel.any():
                out[sel] = c.observe(mu[sel], rng, idx[sel] - sl.start, extra=extra)
        return out

    def logpdf(self, y, mu: np.ndarray, extra=None, **errors) -> np.ndarray:
        """(S, ...) ``log p(y | draw)`` given every draw's curve ``mu``; ``y`` broadcasts against ``mu`` (or has a
        leading draw axis of size S)."""
        out = np.empty(np.broadcast_shapes(np.shape(y), mu.shape))
        per_draw = np.ndim(y) == mu.ndim and np.shape(y)[0] == mu.shape[0]
        for c, sl in self.parts():
            out[sl] = c.logpdf(y[sl] if per_draw else y, mu[sl], extra=extra, **errors)
        return out

    def log_density(self, at, observed, se=None, seed: int = 0) -> np.ndarray:
        """(P,) log predictive density of ``observed`` runs: ``log sum_k w_k mean_s p_k(y | draw s)`` (y units),
        the extrapolation error included; ``se``: known measurement error of the new runs (y units)."""
        y = np.asarray(observed, float).reshape(-1)
        mu = self._curve(_values(self.law, at), self.error_z(seed))  # each component's draws, as they are
        errors = {} if se is None else {"se": np.broadcast_to(np.asarray(se, float), y.shape), "y_ref": y}
        lp = self.logpdf(y[None, :], mu, **errors)
        w = np.array([c.weight for c in self.components], float)
        per = np.stack([log_mean_exp(lp[sl], axis=0) for _, sl in self.parts()])
        return logsumexp(per + np.log(w / w.sum())[:, None], axis=0)

    def beyond(self, at) -> np.ndarray:
        """(P,) distance beyond the first component's fitted runs (what bands report as ``beyond``)."""
        return self.components[0].beyond(_values(self.law, at))

    def without_error(self) -> "PosteriorDraws":
        """The same draws with no extrapolation error (tau 0 in every component)."""
        return replace(self, components=[replace(c, tau=0.0) for c in self.components])

    @property
    def taus(self) -> dict:
        """Median ``tau`` of each law."""
        return {c.law.name: c.tau_median for c in self.components}

    @property
    def error_notes(self) -> dict:
        """How each law's extrapolation error was obtained."""
        return {c.law.name: c.error_note or ("none (raw posterior)" if not np.any(c.tau) else "fixed tau")
                for c in self.components}


def posterior_draws(model, max_draws: int | None = 2000, seed: int = 0) -> PosteriorDraws:
    """The :class:`PosteriorDraws` of a fit, a model average or anything with ``posterior_draws(max_draws, seed)``
    (a :class:`PosteriorDraws` is returned as is)."""
    if isinstance(model, PosteriorDraws):
        return model
    make = getattr(model, "posterior_draws", None)
    if make is None:
        raise TypeError(f"expected a bayescale Fit, ModelAverage or PosteriorDraws, got {type(model).__name__}")
    return make(max_draws=max_draws, seed=seed)


def mixture(parts: list, weights, max_draws: int | None, seed: int, source: str,
            resample: bool = True) -> PosteriorDraws:
    """A mixture of :class:`PosteriorDraws` ``parts`` with ``weights``.

    ``resample=True``: flat draws, ``max_draws`` (default 4000) split among the parts by a multinomial draw, each
    part's draws resampled. ``resample=False``: every part keeps its draws and its weight (``weighted``), which
    gives :meth:`PosteriorDraws.log_density` exactly ``log sum_k w_k p_k(y)`` and nothing else.
    """
    w = np.asarray(weights, float)
    if not resample:
        comps = [replace(c, weight=float(wk)) for part, wk in zip(parts, w) for c in part.components]
        return PosteriorDraws(comps, source=source, weighted=True)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(max_draws or 4000, w / w.sum())
    comps = []
    for part, wk, cnt in zip(parts, w, counts):
        if cnt == 0:
            continue
        for c in part.components:
            idx = rng.choice(c.size, size=cnt, replace=cnt > c.size)
            tau = c.tau[idx] if np.ndim(c.tau) else c.tau
            comps.append(replace(c, params={k: v[idx] for k, v in c.params.items()}, weight=float(wk), tau=tau))
    return PosteriorDraws(comps, source=source)


def law_draws(law, params: dict, sigma=0.0, center: dict | None = None, likelihood: str = DEFAULT,
              tau: float = 0.0, lo: dict | None = None, hi: dict | None = None) -> PosteriorDraws:
    """Draws of ``law`` at given parameter values (arrays or scalars) in its centred parametrisation.

    With ``center=None`` every input is centred at 1 (ln x0 = 0), so the centred parameters equal the published
    ones up to logs: for chinchilla ``a = ln A``, ``b = ln B``. ``lo``/``hi``: the fitted range of each input
    (centred units; default: the centre only), which the extrapolation error ``tau`` is measured from.
    """
    law = get_law(law)
    arrs = {k: np.atleast_1d(np.asarray(v, float)) for k, v in params.items()}
    n = max(len(v) for v in arrs.values())
    arrs = {k: np.broadcast_to(v, (n,)).copy() for k, v in arrs.items()}
    missing = [p for p in law.param_names if p not in arrs]
    if missing:
        raise BayescaleError(f"law {law.name!r} needs parameters {list(law.param_names)}; missing {missing}")
    arrs["sigma"] = np.broadcast_to(np.asarray(sigma, float), (n,)).copy()
    center = {i.name: 0.0 for i in law.inputs} if center is None else dict(center)
    zero = {k: 0.0 for k in center}
    scales = Scales(y_min=np.nan, y_max=np.nan, y_med=1.0, center=center, lo=dict(lo or zero), hi=dict(hi or zero))
    return PosteriorDraws([Component(law, arrs, scales, likelihood, tau=float(tau))], source=law.name)
