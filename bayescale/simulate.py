"""Simulated curves from known laws: one example truth per registered family, for coverage checks.

:data:`EXAMPLES` holds, per law, a design (input values) and true parameters in the law's centred parametrisation
(inputs enter as ``ln(x / x0)``, ``x0`` the geometric mean of the fitted points), plus the sampler settings its fits
need; :func:`simulate` draws curves from it. ``tests/test_laws.py`` checks recovery and band coverage on every row
(a new law gets a row here), and ``benchmarks/coverage.py`` measures coverage at several levels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayescale.laws import get_law
from bayescale.runs import scales_for, transform_inputs

__all__ = ["EXAMPLES", "Example", "SIGMA", "broken_power_law", "simulate"]

SIGMA = 0.02  # relative noise of simulated runs


@dataclass(frozen=True)
class Example:
    """A law's example: ``design`` (input name -> values), ``truth`` (parameter -> value), the ``fit_settings``
    its fits need beyond the defaults, and the median r-hat its fits are held to (``rhat_max``)."""

    design: dict
    truth: dict
    fit_settings: dict = field(default_factory=dict)
    rhat_max: float = 1.05


def grid(**axes) -> dict:
    """Every combination of the given input values, as flat arrays."""
    mesh = np.meshgrid(*axes.values())
    return {k: m.ravel() for k, m in zip(axes, mesh)}


X1 = {"x": np.geomspace(1e6, 1e9, 27)}
EXAMPLES = {
    "M1": Example(X1, dict(a=0.7, c=0.3)),
    "M2": Example(X1, dict(eps_inf=0.5, a=0.0, c=0.35)),
    "M3": Example(X1, dict(a=0.5, c=0.5, log_g=-2.0)),
    # M4's chains mix slowly: with 2 chains of 300 draws the median r-hat of 3 curves ranged 1.02-1.10 over seeds
    "M4": Example(X1, dict(eps_inf=0.2, eps_0=1.0, alpha=1.0, k=0.0, c=0.5), dict(warmup=600, chains=4, samples=600)),
    "BNSL1": Example(X1, dict(eps_inf=0.3, a=0.0, c0=0.2, t1=0.5, c1=0.4, f1=0.3)),
    "BNSL2": Example({"x": np.geomspace(1e6, 1e9, 45)},
                     dict(eps_inf=0.3, a=0.0, c0=0.1, t1=-1.5, gap2=2.5, c1=0.3, f1=0.3, c2=0.3, f2=0.3),
                     # two weakly identified breaks in 45 points: chains may settle on different break placements, so
                     # r-hat is loose here (recovery and coverage still apply)
                     dict(chains=4, warmup=1000), rhat_max=1.5),
    "chinchilla": Example(grid(N=np.geomspace(1e7, 1e9, 7), D=np.geomspace(1e9, 1e11, 6)),
                          dict(E=1.7, a=np.log(0.6), alpha=0.34, b=np.log(0.5), beta=0.28)),
    "kaplan": Example(grid(N=np.geomspace(1e7, 1e9, 7), D=np.geomspace(1e9, 1e11, 6)),
                      dict(m=1.1, w=0.5, alphaN=0.08, alphaD=0.1)),
    "overtrain": Example(grid(C=np.geomspace(1e17, 1e20, 7), M=np.geomspace(5, 320, 6)),
                         dict(E=1.8, la=np.log(0.4), lb=np.log(0.4), eta=0.2)),
    "downstream": Example({"L": np.linspace(2.5, 4.5, 27)}, dict(eps=0.8, lk=np.log(0.15), gamma=1.0)),
    "sigmoid": Example({"C": np.geomspace(1e18, 1e24, 27)}, dict(lo=0.25, hi=0.85, k=0.8, m=0.5)),
}


def simulate(name: str, n_curves: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """``n_curves`` curves of law ``name`` from its example truth with multiplicative noise ``SIGMA``: one row per
    point (the law's input columns, ``y``, ``curve``, ``held_out``: every third point, inside the design), and the
    truth (centred parametrisation, centred on the points not held out)."""
    law = get_law(name)
    ex = EXAMPLES[name]
    design, truth = ex.design, ex.truth
    frame = pd.DataFrame(design)
    n = len(frame)
    hold = np.zeros(n, bool)
    hold[1::3] = True
    rng = np.random.default_rng(seed)
    # centre = mean log input of the *fitted* points, as the fit will compute it
    center = scales_for(law, frame[~hold].assign(y=1.0)).center
    t = transform_inputs(law, {k: frame[k].to_numpy() for k in law.input_names}, center)
    mu = np.asarray(law.mean({k: np.float64(v) for k, v in truth.items()}, t))
    rows = []
    for c in range(n_curves):
        y = mu * np.exp(rng.normal(0.0, SIGMA, n))
        rows.append(frame.assign(y=y, curve=f"c{c}", held_out=hold))
    return pd.concat(rows, ignore_index=True), truth


def broken_power_law(n_curves: int, seed: int) -> pd.DataFrame:
    """Curves whose power law breaks beyond the runs a fit sees: ``y = 0.5 + 2 (x/1e6)^-0.3 (1 + x/2e8)^-c1``, 20
    runs from 1e6 to 1e8 (``target`` False) and 4 from 3e8 to 3e9 (``target`` True), the exponent change ``c1``
    uniform up to BNSL1's example either way, noise :data:`SIGMA`. A law fitted to the runs (M2) cannot see the
    bend: a test of honest bands beyond the data. Columns ``x, y, curve, target``."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.geomspace(1e6, 1e8, 20), np.geomspace(3e8, 3e9, 4)])
    c1_max = EXAMPLES["BNSL1"].truth["c1"]
    rows = []
    for c in range(n_curves):
        c1 = rng.uniform(-c1_max, c1_max)
        mu = 0.5 + 2.0 * (x / 1e6) ** -0.3 * (1 + x / 2e8) ** -c1
        rows.append(pd.DataFrame({"x": x, "y": mu * np.exp(rng.normal(0, SIGMA, len(x))), "curve": c,
                                  "target": x > 1e8}))
    return pd.concat(rows, ignore_index=True)
