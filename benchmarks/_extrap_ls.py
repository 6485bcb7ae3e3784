"""Least-squares baselines of the extrapolation benchmark, for any registered law.

``ls``: multi-start least squares of ``ln y`` (Levenberg-Marquardt/trust-region, scipy) in the law's unconstrained
parametrisation (each parameter mapped through the bijector of its prior's support, so constraints always hold);
starts are seeded prior draws. A point prediction; its bands and density are a Gaussian in log space with the
residual standard deviation (``sqrt(RSS / (n - k))``), i.e. a lognormal.

``boot``: nonparametric bootstrap: resample the runs with replacement (as integer weights on the residuals, which
is the same fit and keeps one compiled program), refit from the full-data optimum, and predict. The predictive is
the mixture over resamples of lognormals around each resample's prediction with its residual sigma.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from numpyro.distributions.transforms import biject_to
from scipy.optimize import least_squares

from bayescale.laws import Law
from bayescale.model import curve_data, pad_length
from bayescale.runs import transform_inputs


class LSProblem:
    """``ln y - ln mu(theta)`` of one curve, padded like NUTS fits (masked) so curves share compiled programs."""

    def __init__(self, law: Law, ctx: pd.DataFrame):
        self.law = law
        self.n, self.k = len(ctx), len(law.params)
        data, self.scales = curve_data(law, ctx, pad_length(self.n))
        self.t, self.ly, self.mask = data["t"], np.log(data["y"]), data["mask"].astype(float)
        self.priors = [p.prior(self.scales) for p in law.params]
        self.bij = [biject_to(d.support) for d in self.priors]
        self._res, self._jac, self._mean = _compiled(law)

    def starts(self, n: int, seed: int) -> np.ndarray:
        keys = jax.random.split(jax.random.PRNGKey(seed), len(self.priors))
        cols = [np.asarray(self.bij[i].inv(d.sample(keys[i], (n,)))) for i, d in enumerate(self.priors)]
        return np.stack(cols, axis=1)

    def _p(self, z) -> np.ndarray:
        return np.array([float(self.bij[i](z[i])) for i in range(self.k)])

    def _dpdz(self, z, p) -> np.ndarray:
        # every support bijector here is increasing and elementwise: dp/dz = exp(log|J|)
        return np.array([float(np.exp(self.bij[i].log_abs_det_jacobian(z[i], p[i]))) for i in range(self.k)])

    def fit(self, z0, weights=None):
        """Minimise the (count-weighted) squared log residuals from ``z0``; returns (z, sigma, rss) or None."""
        w = self.mask if weights is None else self.mask * np.concatenate([weights, np.zeros(len(self.mask) - self.n)])
        args = (self.t, self.ly, np.sqrt(w))

        def fun(z):
            return np.asarray(self._res(self._p(z), *args))

        def jac(z):
            p = self._p(z)
            return np.asarray(self._jac(p, *args)) * self._dpdz(z, p)[None, :]

        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                if not np.all(np.isfinite(fun(z0))):
                    return None
                sol = least_squares(fun, z0, jac=jac, method="trf", x_scale="jac", max_nfev=200)
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            return None
        if not np.all(np.isfinite(sol.fun)):
            return None
        dof = max(w.sum() - self.k, 1.0)
        rss = float(np.sum(sol.fun**2))
        return sol.x, max(float(np.sqrt(rss / dof)), 1e-6), rss

    def predict(self, z, at: pd.DataFrame) -> np.ndarray:
        t = transform_inputs(self.law, {k: at[k].to_numpy() for k in self.law.input_names}, self.scales.center)
        return np.asarray(self._mean(self._p(z), t))


_CACHE: dict = {}


def _compiled(law: Law):
    """Residuals, their Jacobian in the natural parameters, and the mean: jitted once per law."""
    if law.name in _CACHE:
        return _CACHE[law.name]

    def mean(pv, t):
        return law.mean({prm.name: pv[i] for i, prm in enumerate(law.params)}, t)

    def res(pv, t, ly, sw):
        return sw * (jnp.log(jnp.maximum(mean(pv, t), 1e-300)) - ly)

    out = (jax.jit(res), jax.jit(jax.jacfwd(res)), jax.jit(mean))
    _CACHE[law.name] = out
    return out


def ls_fit(law: Law, ctx: pd.DataFrame, seed: int, starts: int = 8):
    """Best of ``starts`` seeded multi-start fits: (problem, z, sigma); raises if every start fails."""
    prob = LSProblem(law, ctx)
    best = None
    for z0 in prob.starts(starts, seed):
        out = prob.fit(z0)
        if out is not None and (best is None or out[2] < best[2]):
            best = out
    if best is None:
        raise RuntimeError(f"least squares of {law.name} failed from all {starts} starts")
    return prob, best[0], best[1]


def ls_predictive(law: Law, ctx, tgt, seed: int, starts: int = 8, n_draws: int = 1000, grid=None):
    """Point fit + lognormal residual noise: dict with log_mu (1, m), sigma (1,), draws (S, m), grid draws."""
    prob, z, sigma = ls_fit(law, ctx, seed, starts)
    rng = np.random.default_rng(seed)
    mu = prob.predict(z, tgt)
    out = {"log_mu": np.log(mu)[None, :], "sigma": np.array([sigma]), "point": mu,
           "draws": mu[None, :] * np.exp(sigma * rng.standard_normal((n_draws, len(mu))))}
    if grid is not None:
        g = prob.predict(z, grid)
        out["grid_draws"] = g[None, :] * np.exp(sigma * rng.standard_normal((400, len(g))))
    return out


def boot_predictive(law: Law, ctx, tgt, seed: int, starts: int = 8, n_boot: int = 200, per: int = 5, grid=None):
    """Bootstrap of the least-squares fit: mixture over resamples of lognormal(ln mu_b, sigma_b)."""
    prob, z, sigma = ls_fit(law, ctx, seed, starts)
    rng = np.random.default_rng(seed + 1)
    n = prob.n
    log_mu, sig, glog = [], [], []
    for _ in range(n_boot):
        counts = np.bincount(rng.integers(0, n, n), minlength=n).astype(float)
        if (counts > 0).sum() < prob.k + 1:
            continue
        out = prob.fit(z, counts)
        if out is None:
            continue
        mu = prob.predict(out[0], tgt)
        if not np.all(np.isfinite(mu)) or np.any(mu <= 0):
            continue
        log_mu.append(np.log(mu))
        sig.append(out[1])
        if grid is not None:
            glog.append(np.log(prob.predict(out[0], grid)))
    if len(log_mu) < n_boot // 2:
        raise RuntimeError(f"bootstrap of {law.name}: only {len(log_mu)}/{n_boot} resamples fitted")
    log_mu, sig = np.stack(log_mu), np.array(sig)
    eps = rng.standard_normal((len(sig), per, log_mu.shape[1]))
    draws = np.exp(log_mu[:, None, :] + sig[:, None, None] * eps).reshape(-1, log_mu.shape[1])
    out = {"log_mu": log_mu, "sigma": sig, "draws": draws, "point": prob.predict(z, tgt), "n_boot": len(sig)}
    if grid is not None:
        g = np.stack(glog)
        out["grid_draws"] = np.exp(g + sig[:, None] * rng.standard_normal(g.shape))
    return out
