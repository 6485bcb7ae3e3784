"""IsoFLOP profiles: the optimum that runs measure without a law, and how far a law's optimum strays from it.

Runs of several model sizes at one compute budget (an isoFLOP profile, approach 2 of Hoffmann et al. 2022) measure
the compute-optimal size there directly: a parabola of ln y in ln N through the profile's runs has its minimum at
``ln N*_k`` (kept when clearly convex, with the minimum inside the profile's sizes; standard error ``se_k`` from the
parabola's least-squares covariance by the delta method; a term linear in log compute absorbs runs whose compute
differs a little within the profile). :func:`isoflop_optima` finds the profiles in a run table.

A law's optimum ``N*_law(C)`` (:func:`bayescale.decisions.compute_optimal`) can miss them: the law's form, not
the runs, sets how its N* grows with C (on the Chinchilla runs the lognormal fit's N* grows about 0.2 ln units per
decade faster than the profiles'). :class:`OptimumDiscrepancy` learns the miss from K profiles::

    ln N*_k - ln N*_law(C_k) = c0 + c1 log10(C_k / C_ref) + e_k,    e_k ~ Normal(0, s^2 + se_k^2)

(``s``, the profiles' scatter about the line, by restricted maximum likelihood; ``c0, c1`` by generalised least
squares) and predicts it at any budget as a Student-t with K - 2 degrees of freedom, whose spread grows with the
distance from the profiles' budgets. :func:`~bayescale.decisions.compute_optimal` multiplies each draw's law
optimum by ``exp`` of a draw of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayescale.errors import BayescaleError
from bayescale.runs import default_cost

__all__ = ["MIN_PROFILES", "OptimumDiscrepancy", "isoflop_optima"]

MIN_PROFILES = 3  # a line and a scatter need three measured optima
_SCATTER_GRID = np.linspace(0.0, 3.0, 1201)  # s, ln units


def _cost(cost, n, d) -> np.ndarray:
    return default_cost(n, d) if cost is None else np.asarray(cost(n, d), float)


def _centres(lc: np.ndarray, width: float) -> np.ndarray:
    """Modes of the runs' density in log10 compute (Gaussian kernel of sd ``width / 2``): one per profile, so
    budgets that scatter a little (measured compute, extracted from plots) still gather around their mode."""
    grid = np.arange(lc.min() - width, lc.max() + width, width / 25)
    dens = np.exp(-0.5 * ((grid[:, None] - lc[None, :]) / (width / 2)) ** 2).sum(axis=1)
    peak = (dens[1:-1] > dens[:-2]) & (dens[1:-1] >= dens[2:])
    return grid[1:-1][peak]


def _vertex(ln_n: np.ndarray, ln_y: np.ndarray, lc: np.ndarray) -> tuple[float, float, str]:
    """(ln N at the parabola's minimum, its standard error, "" or why the profile measures no optimum). Where the
    runs' compute ``lc`` (log10) differs within the profile, a term linear in it takes the difference out, so the
    minimum is the one at the profile's mean compute."""
    if len(np.unique(ln_n)) < 3:
        return np.nan, np.nan, "fewer than 3 sizes"
    m = ln_n.mean()
    cols = [np.ones_like(ln_n), ln_n - m, (ln_n - m) ** 2]
    if np.std(lc) > 0.005:
        cols.append(lc - lc.mean())
    if len(ln_n) <= len(cols):
        return np.nan, np.nan, f"fewer than {len(cols) + 1} runs (no residual to judge the parabola by)"
    x = np.stack(cols, axis=1)
    beta, *_ = np.linalg.lstsq(x, ln_y, rcond=None)
    resid = ln_y - x @ beta
    cov = (resid @ resid / (len(ln_y) - len(cols))) * np.linalg.pinv(x.T @ x)
    c1, c2 = beta[1], beta[2]
    if not c2 > 2 * np.sqrt(cov[2, 2]):
        return np.nan, np.nan, "no clear minimum (the parabola is not clearly convex)"
    u = m - c1 / (2 * c2)
    if not ln_n.min() <= u <= ln_n.max():
        return np.nan, np.nan, "the minimum lies outside the profile's sizes"
    grad = np.zeros(len(cols))
    grad[1:3] = -1 / (2 * c2), c1 / (2 * c2**2)
    return float(u), float(np.sqrt(max(grad @ cov @ grad, 0.0))), ""


def isoflop_optima(runs: pd.DataFrame, cost=None, width: float = 0.1, min_runs: int = 4) -> pd.DataFrame:
    """The isoFLOP profiles in a run table and the optimum each measures.

    Parameters
    ----------
    runs : DataFrame
        Columns ``N`` (parameters), ``D`` (tokens) and ``y`` (a loss: lower is better, > 0), as a fit keeps them
        (:attr:`bayescale.Fit.runs`).
    cost : callable, optional
        ``cost(N, D)``, the compute of a run (default :func:`bayescale.runs.default_cost`, 6ND FLOP).
    width : float
        Decades of compute around a profile's centre (a mode of the runs' compute) that count as on it.
    min_runs : int
        Fewest runs of a profile.

    Returns
    -------
    DataFrame
        One row per profile of at least ``min_runs`` runs, by budget: ``budget`` (geometric mean of its runs'
        compute), ``n_runs``, ``n_sizes``, ``N_opt`` (the parabola's minimum; NaN where none), ``ln_se`` (its
        standard error, ln units), ``used`` (it measures an optimum) and ``reason`` (why not, else "").
    """
    missing = [c for c in ("N", "D", "y") if c not in runs]
    if missing:
        raise BayescaleError(f"isoFLOP profiles need columns N, D and y (a fit's runs); missing {missing}")
    n, d, y = (runs[c].to_numpy(float) for c in ("N", "D", "y"))
    ok = np.isfinite(n) & np.isfinite(d) & np.isfinite(y) & (n > 0) & (d > 0) & (y > 0)
    n, d, y = n[ok], d[ok], y[ok]
    cols = ["budget", "n_runs", "n_sizes", "N_opt", "ln_se", "used", "reason"]
    if len(y) < min_runs:
        return pd.DataFrame(columns=cols)
    lc = np.log10(_cost(cost, n, d))
    centres = _centres(lc, width)
    near = np.abs(lc[:, None] - centres[None, :])
    k = near.argmin(axis=1)
    rows = []
    for j in range(len(centres)):
        on = (k == j) & (near[np.arange(len(lc)), k] <= width)
        if on.sum() < min_runs:
            continue
        u, se, why = _vertex(np.log(n[on]), np.log(y[on]), lc[on])
        rows.append({"budget": float(10 ** lc[on].mean()), "n_runs": int(on.sum()),
                     "n_sizes": int(len(np.unique(n[on]))), "N_opt": float(np.exp(u)), "ln_se": se,
                     "used": not why, "reason": why})
    return pd.DataFrame(rows, columns=cols)


@dataclass(frozen=True)
class OptimumDiscrepancy:
    """How far a law's optimum lies from the profiles' (see the module docstring): ``coef`` (c0, c1), their
    covariance ``cov`` (2 x 2), the scatter ``s`` (ln units), ``dof`` = K - 2, ``log_c_ref`` (log10 of the
    reference budget) and the profiles' budgets."""

    coef: tuple
    cov: tuple
    scatter: float
    dof: int
    log_c_ref: float
    budgets: tuple

    @classmethod
    def learn(cls, optima: pd.DataFrame, law_ln_n: np.ndarray) -> "OptimumDiscrepancy":
        """From the used rows of :func:`isoflop_optima` and the law's ln N* draws at their budgets (S, K)."""
        if len(optima) < MIN_PROFILES:
            raise BayescaleError(f"learning the law's optimum discrepancy needs {MIN_PROFILES} measured optima, "
                                 f"got {len(optima)}")
        x = np.log10(optima["budget"].to_numpy(float))
        ref = float(x.mean())
        x = np.stack([np.ones_like(x), x - ref], axis=1)
        r = np.log(optima["N_opt"].to_numpy(float)) - np.median(np.asarray(law_ln_n, float), axis=0)
        v = optima["ln_se"].to_numpy(float) ** 2
        best = None
        for s in _SCATTER_GRID:
            w = 1.0 / np.maximum(v + s**2, 1e-12)
            a = x.T @ (w[:, None] * x)
            c = np.linalg.solve(a, x.T @ (w * r))
            e = r - x @ c
            reml = -0.5 * (np.sum(np.log(1.0 / w)) + np.sum(w * e**2) + np.linalg.slogdet(a)[1])
            if best is None or reml > best[0]:
                best = (reml, s, c, np.linalg.inv(a))
        _, s, c, cov = best
        return cls(tuple(map(float, c)), tuple(map(float, cov.ravel())), float(s), len(r) - 2, ref,
                   tuple(float(b) for b in optima["budget"]))

    def _design(self, budgets) -> np.ndarray:
        """(B, 2): 1 and log10(C / C_ref) of each budget."""
        return np.stack([np.ones(np.size(budgets)), np.log10(np.asarray(budgets, float)).ravel() - self.log_c_ref], 1)

    def mean_sd(self, budgets) -> tuple[np.ndarray, np.ndarray]:
        """Mean and scale of the discrepancy (ln units) at ``budgets``."""
        x = self._design(budgets)
        cov = np.asarray(self.cov).reshape(2, 2)
        return x @ np.asarray(self.coef), np.sqrt(np.einsum("bi,ij,bj->b", x, cov, x) + self.scatter**2)

    def draws(self, budgets, n: int, seed) -> np.ndarray:
        """(n, B) draws of ``ln N*_true - ln N*_law`` at ``budgets``: per draw a line (coefficients and scatter,
        one of each, times one Student-t scale), so each draw's optimum moves smoothly with the budget; at each
        budget they follow ``mean + scale * t(K - 2)`` (:meth:`mean_sd`)."""
        x = self._design(budgets)
        rng = np.random.default_rng(seed)
        val, vec = np.linalg.eigh(np.asarray(self.cov).reshape(2, 2))
        coef = rng.standard_normal((n, 2)) @ (vec * np.sqrt(np.maximum(val, 0.0))).T  # Normal(0, cov)
        wobble = coef @ x.T + self.scatter * rng.standard_normal((n, 1))
        scale = np.sqrt(self.dof / rng.chisquare(self.dof, size=(n, 1)))
        return (x @ np.asarray(self.coef))[None, :] + scale * wobble

    def describe(self) -> str:
        lo, hi = min(self.budgets), max(self.budgets)
        return (f"the law's N* corrected by {len(self.budgets)} isoFLOP profiles of the runs ({lo:.2g}-{hi:.2g}): "
                f"profile optimum / law's = exp({self.coef[0]:+.3f} {self.coef[1]:+.3f} per decade from "
                f"{10 ** self.log_c_ref:.2g}), scatter {self.scatter:.3f} ln units")
