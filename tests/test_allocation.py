"""Compute-optimal allocation: analytic Chinchilla optimum, numeric solver against the closed form, custom costs,
bad inputs, the frontier plot, and the law's optimum checked by isoFLOP profiles."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.decisions import compute_optimal, default_cost
from bayescale.decisions.isoflop import isoflop_optima
from bayescale.plots import plot_frontier
from bayescale.posterior import law_draws

# Hoffmann et al.'s published fit (approach 3)
E, A, ALPHA, B, BETA = 1.69, 406.4, 0.34, 410.7, 0.28
BUDGETS = np.array([1e19, 1e21, 1e23, 1e25])


def analytic(E, A, alpha, B, beta, C):
    G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    n = G * (C / 6) ** (beta / (alpha + beta))
    d = C / (6 * n)
    return n, d, E + A / n**alpha + B / d**beta


@pytest.fixture(scope="module")
def known():
    """Five 'posterior draws' of the Chinchilla law at known, slightly different parameters."""
    rng = np.random.default_rng(1)
    p = {"E": E + rng.normal(0, 0.02, 5), "A": A * np.exp(rng.normal(0, 0.1, 5)), "alpha": ALPHA + rng.normal(0, 0.01, 5),
         "B": B * np.exp(rng.normal(0, 0.1, 5)), "beta": BETA + rng.normal(0, 0.01, 5)}
    draws = law_draws("chinchilla", {"E": p["E"], "a": np.log(p["A"]), "alpha": p["alpha"], "b": np.log(p["B"]),
                                     "beta": p["beta"]})
    return p, draws


@pytest.mark.parametrize("method", ["closed", "numeric"])
def test_recovers_analytic_optimum_per_draw(known, method):
    p, draws = known
    opt = compute_optimal(draws, BUDGETS, method=method, keep_draws=True)
    n, d, L = analytic(p["E"][:, None], p["A"][:, None], p["alpha"][:, None], p["B"][:, None], p["beta"][:, None],
                       BUDGETS[None, :])
    np.testing.assert_allclose(opt["N_opt_draws"].values, n, rtol=1e-5)
    np.testing.assert_allclose(opt["D_opt_draws"].values, d, rtol=1e-5)
    np.testing.assert_allclose(opt["L_opt_draws"].values, L, rtol=1e-9)
    np.testing.assert_allclose(6 * opt["N_opt_draws"].values * opt["D_opt_draws"].values, np.broadcast_to(BUDGETS, (5, 4)), rtol=1e-9)
    assert float(opt["at_edge"].max()) == 0.0


def test_single_known_law_gives_point_posterior():
    draws = law_draws("chinchilla", {"E": E, "a": np.log(A), "alpha": ALPHA, "b": np.log(B), "beta": BETA})
    opt = compute_optimal(draws, BUDGETS)
    n, d, L = analytic(E, A, ALPHA, B, BETA, BUDGETS)
    np.testing.assert_allclose(opt["N_opt_median"].values, n, rtol=1e-9)
    np.testing.assert_allclose(opt["N_opt_lower"].values, np.broadcast_to(n, (2, 4)), rtol=1e-9)
    np.testing.assert_allclose(opt["tokens_per_param_median"].values, d / n, rtol=1e-9)
    assert opt.attrs["method"] == "closed"


def test_numeric_matches_closed_form_on_a_fit(chinchilla_fit):
    chinchilla_fit = chinchilla_fit.with_error(None)  # L* is then the law's at N*, which both methods find
    closed = compute_optimal(chinchilla_fit, BUDGETS, keep_draws=True, max_draws=300, profiles=None)
    numeric = compute_optimal(chinchilla_fit, BUDGETS, keep_draws=True, max_draws=300, method="numeric",
                              profiles=None)
    assert closed.attrs["method"] == "closed" and numeric.attrs["method"] == "numeric"
    np.testing.assert_allclose(numeric["N_opt_draws"].values, closed["N_opt_draws"].values, rtol=1e-4)
    np.testing.assert_allclose(numeric["L_opt_draws"].values, closed["L_opt_draws"].values, rtol=1e-9)
    # a posterior, not a point: intervals nest around the median
    for v in ("N_opt", "D_opt", "L_opt"):
        lo, hi, med = closed[f"{v}_lower"], closed[f"{v}_upper"], closed[f"{v}_median"]
        assert (lo.sel(level=0.95) <= lo.sel(level=0.8)).all() and (lo.sel(level=0.8) <= med).all()
        assert (med <= hi.sel(level=0.8)).all() and (hi.sel(level=0.8) <= hi.sel(level=0.95)).all()
        assert (hi.sel(level=0.95) > lo.sel(level=0.95)).all()


def test_custom_cost_is_a_rescaled_budget(known):
    _, draws = known
    twice = compute_optimal(draws, BUDGETS, cost=lambda n, d: 12.0 * n * d, keep_draws=True)
    half = compute_optimal(draws, BUDGETS / 2, keep_draws=True)
    assert twice.attrs["method"] == "numeric"
    np.testing.assert_allclose(twice["N_opt_draws"].values, half["N_opt_draws"].values, rtol=1e-4)
    np.testing.assert_allclose(twice["L_opt_draws"].values, half["L_opt_draws"].values, rtol=1e-8)


def test_numeric_optimum_of_kaplan_is_a_minimum():
    draws = law_draws("kaplan", {"m": np.log(3.0), "w": 0.4, "alphaN": 0.076, "alphaD": 0.095})
    opt = compute_optimal(draws, BUDGETS, keep_draws=True)
    n, L = opt["N_opt_draws"].values[0], opt["L_opt_draws"].values[0]
    for f in (0.98, 1.02):
        comp = draws.components[0]
        other = comp.mean({"N": n * f, "D": BUDGETS / (6 * n * f)})[0]
        assert np.all(other >= L)


def test_bad_inputs(known):
    _, draws = known
    with pytest.raises(bs.BayescaleError, match="N and D"):
        compute_optimal(law_draws("M2", {"eps_inf": 0.1, "a": 0.0, "c": 0.3}), [1e20])
    for bad in ([0.0], [-1e20], [np.nan], []):
        with pytest.raises(bs.BayescaleError, match="budgets"):
            compute_optimal(draws, bad)
    with pytest.raises(bs.BayescaleError, match="method"):
        compute_optimal(draws, [1e20], method="newton")
    with pytest.raises(bs.BayescaleError, match="cost"):
        compute_optimal(draws, [1e20], cost="6ND")
    with pytest.raises(bs.BayescaleError, match="closed form"):
        compute_optimal(law_draws("kaplan", {"m": 1.0, "w": 0.4, "alphaN": 0.07, "alphaD": 0.09}), [1e20], method="closed")
    with pytest.raises(TypeError, match="Fit"):
        compute_optimal({"E": 1.0}, [1e20])


def test_plot_frontier(known, tmp_path):
    _, draws = known
    opt = compute_optimal(draws, np.geomspace(1e19, 1e25, 7))
    ax = plot_frontier(opt, path=tmp_path / "frontier.png", levels=[0.8], show=("N", "D", "L"))
    assert (tmp_path / "frontier.png").stat().st_size > 0
    assert len(ax.lines) >= 3
    with pytest.raises(bs.BayescaleError, match="levels"):
        plot_frontier(opt, levels=[0.5])


def test_extrapolation_error_enters_the_allocation():
    """A known law with an extrapolation error tau: far beyond its runs each draw's L* carries exp(tau b z), so
    L* gets a band whose width follows tau * b at the optimum; the optimum itself is the law's."""
    p = {"E": E, "a": np.log(A), "alpha": ALPHA, "b": np.log(B), "beta": BETA}
    zeros = np.zeros(400)
    # runs spanning N in [1e8, 1e9] and D in [1e9, 1e10] (centred at 1: ln-unit ranges)
    rng_ = dict(lo={"N": np.log(1e8), "D": np.log(1e9)}, hi={"N": np.log(1e9), "D": np.log(1e10)})
    raw = compute_optimal(law_draws("chinchilla", {k: v + zeros for k, v in p.items()}, **rng_), [1e24], levels=(0.8,))
    cal = compute_optimal(law_draws("chinchilla", {k: v + zeros for k, v in p.items()}, tau=0.05, **rng_), [1e24],
                          levels=(0.8,), keep_draws=True)
    assert cal.attrs["extrapolation_tau"] == "chinchilla:0.05"
    width = lambda o, v: float(o[f"{v}_upper"].values[0, 0] / o[f"{v}_lower"].values[0, 0])  # noqa: E731
    assert width(raw, "L_opt") == pytest.approx(1.0) and width(raw, "N_opt") == pytest.approx(1.0)
    # L* at the optimum lies b ~ 2+ decades beyond the runs: an 80% band of about exp(2 * 1.28 * tau b) wide
    n, d, L = analytic(E, A, ALPHA, B, BETA, 1e24)
    b = max(np.log10(n / 1e9), np.log10(d / 1e10))
    assert 1.5 < b < 4
    assert np.log(width(cal, "L_opt")) == pytest.approx(2 * 1.2816 * 0.05 * b, rel=0.25)
    assert width(cal, "N_opt") == pytest.approx(1.0)
    # the median optimum stays where the law puts it
    assert float(cal["L_opt_median"].values[0]) == pytest.approx(L, rel=0.02)


def test_calibrated_fit_widens_its_allocation(chinchilla_fit):
    raw = compute_optimal(chinchilla_fit, [1e24], levels=(0.8,), max_draws=300)
    cal = compute_optimal(chinchilla_fit.with_discrepancy(0.05), [1e24], levels=(0.8,), max_draws=300)
    np.testing.assert_allclose(cal["N_opt_median"].values, raw["N_opt_median"].values, rtol=1e-9)
    for v in ("L_opt",):
        w_raw = float(np.log(raw[f"{v}_upper"].values[0, 0] / raw[f"{v}_lower"].values[0, 0]))
        w_cal = float(np.log(cal[f"{v}_upper"].values[0, 0] / cal[f"{v}_lower"].values[0, 0]))
        assert w_cal > 1.2 * w_raw, v


def test_default_cost_is_the_budget_the_optimum_spends(known):
    assert default_cost(7e10, 1.4e12) == pytest.approx(6 * 7e10 * 1.4e12, rel=1e-15)
    _, draws = known
    for method in ("closed", "numeric"):
        opt = compute_optimal(draws, BUDGETS, keep_draws=True, method=method)
        np.testing.assert_allclose(default_cost(opt["N_opt_draws"].values, opt["D_opt_draws"].values),
                                   np.broadcast_to(BUDGETS, (5, 4)), rtol=1e-9)


def test_decisions_do_not_load_the_plots():
    code = "import sys, bayescale.decisions; print('bayescale.plots' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr


def law_optimum(C):
    """N* of the fixture's central law (Hoffmann et al.'s approach-3 fit) at budgets ``C``."""
    return analytic(E, A, ALPHA, B, BETA, np.asarray(C, float))[0]


def isoflop_runs(budgets, n_opt, seed=0, sizes=7, spread=1.2, noise=0.003, jitter=0.03, shift=0.0):
    """Runs on isoFLOP profiles: at each budget (scattered by up to ``jitter`` decades, as measured compute is)
    ``sizes`` model sizes around ``n_opt`` (times ``exp(shift)``), ln loss a parabola in ln N with its minimum at
    ``n_opt``."""
    rng = np.random.default_rng(seed)
    rows = []
    for c, n0 in zip(budgets, n_opt):
        n = n0 * np.exp(shift + np.linspace(-spread, spread, sizes))
        cc = c * 10 ** rng.uniform(-jitter, jitter, sizes)
        y = np.exp(0.5 + 0.08 * np.log(n / n0) ** 2 + rng.normal(0, noise, sizes))
        rows += [{"N": a, "D": b / (6 * a), "y": v} for a, b, v in zip(n, cc, y)]
    return pd.DataFrame(rows)


def test_isoflop_optima_finds_each_profile_and_its_minimum():
    budgets = np.array([1e18, 1e19, 1e20, 1e21])
    truth = 2 * law_optimum(budgets)
    runs = pd.concat([isoflop_runs(budgets, truth),
                      isoflop_runs([1e22], [1e10], spread=0.4, shift=1.5),  # the minimum below its sizes
                      isoflop_runs([1e23], [1e11], noise=0.05).assign(y=lambda d: d.y.mean())])  # flat
    found = isoflop_optima(runs)
    assert len(found) == 6
    used = found[found.used]
    np.testing.assert_allclose(used["budget"], budgets, rtol=0.1)
    np.testing.assert_allclose(used["N_opt"], truth, rtol=0.03)
    assert (used["ln_se"] > 0).all() and (used["ln_se"] < 0.05).all()
    reasons = found.loc[~found.used, "reason"].tolist()
    assert reasons == ["the minimum lies outside the profile's sizes",
                       "no clear minimum (the parabola is not clearly convex)"]
    assert isoflop_optima(runs.iloc[:3]).empty
    with pytest.raises(bs.BayescaleError, match="columns N, D and y"):
        isoflop_optima(runs.rename(columns={"y": "loss"}))


def test_profiles_move_the_laws_optimum_to_theirs():
    """The law's N* is off: the profiles' optimum is the law's times (C / 1e19)^0.1. The allocation follows the
    profiles, also beyond them, with an interval that widens away from them; without profiles it is the law's."""
    zeros = np.zeros(1000)  # one law, known exactly: the interval is the discrepancy's alone
    draws = law_draws("chinchilla", {k: v + zeros for k, v in
                                     {"E": E, "a": np.log(A), "alpha": ALPHA, "b": np.log(B), "beta": BETA}.items()})
    budgets = np.array([1e18, 3e18, 1e19, 3e19, 1e20])
    ratio = lambda c: (np.asarray(c) / 1e19) ** 0.1  # noqa: E731
    runs = isoflop_runs(budgets, law_optimum(budgets) * ratio(budgets))
    query = np.array([1e19, 1e23])
    law = compute_optimal(draws, query, levels=(0.8,), profiles=None)
    opt = compute_optimal(draws, query, levels=(0.8,), profiles=runs, keep_draws=True)
    assert law.attrs["optimum"] == "the law's (no isoFLOP profiles checked)"
    assert opt.attrs["optimum"].startswith("the law's N* corrected by 5 isoFLOP profiles")
    np.testing.assert_allclose(opt["N_opt_median"] / law["N_opt_median"], ratio(query), rtol=0.05)
    np.testing.assert_allclose(opt["D_opt_draws"] * opt["N_opt_draws"] * 6, np.broadcast_to(query, (1000, 2)),
                               rtol=1e-9)
    lo, hi = opt["N_opt_lower"].values[0], opt["N_opt_upper"].values[0]
    assert np.all((lo < law_optimum(query) * ratio(query)) & (law_optimum(query) * ratio(query) < hi))
    assert np.log(hi[1] / lo[1]) > 2 * np.log(hi[0] / lo[0])  # four decades beyond the profiles: less sure
    assert opt["profile_used"].values.all() and len(opt["profile_N_opt"]) == 5
    np.testing.assert_allclose(opt["profile_N_opt"], law_optimum(budgets) * ratio(budgets), rtol=0.03)


def test_too_few_profiles_keep_the_laws_optimum(known, chinchilla_fit):
    _, draws = known
    runs = isoflop_runs([1e18, 1e19], 2 * law_optimum([1e18, 1e19]))
    law = compute_optimal(draws, [1e22], profiles=None)
    two = compute_optimal(draws, [1e22], profiles=runs)
    np.testing.assert_allclose(two["N_opt_median"], law["N_opt_median"], rtol=1e-12)
    assert "2 isoFLOP profiles of the runs measure an optimum; 3 are needed" in two.attrs["optimum"]
    assert two["profile_N_opt"].size == 2
    # "auto" reads the runs of what it is given (a Fit's, a ModelAverage's); bare draws have none
    class Fitted:
        runs = isoflop_runs([1e18, 1e19, 1e20], 2 * law_optimum([1e18, 1e19, 1e20]))

        def posterior_draws(self, max_draws, seed):
            return draws

    assert "corrected by 3 isoFLOP profiles" in compute_optimal(Fitted(), [1e22]).attrs["optimum"]
    assert "0 isoFLOP profiles" in compute_optimal(chinchilla_fit, [1e22], max_draws=200).attrs["optimum"]
    assert compute_optimal(draws, [1e22]).attrs["optimum"] == "the law's (no isoFLOP profiles checked)"
    for bad in ("bogus", 3):
        with pytest.raises(bs.BayescaleError, match="profiles must be"):
            compute_optimal(draws, [1e22], profiles=bad)


def test_discrepancy_draws_follow_their_student_t():
    """OptimumDiscrepancy: a line through the profiles' misses (here ln 2 + 0.1 per decade, with scatter), whose
    draws at each budget follow mean + scale * t(K - 2) (:meth:`mean_sd`)."""
    from scipy import stats

    from bayescale.decisions.isoflop import OptimumDiscrepancy

    budgets = np.geomspace(1e18, 1e21, 6)
    miss = np.log(2) + 0.1 * np.log10(budgets / 1e19) + np.array([0.05, -0.04, 0.02, -0.05, 0.03, 0.0])
    optima = pd.DataFrame({"budget": budgets, "N_opt": np.exp(miss), "ln_se": 0.02})
    disc = OptimumDiscrepancy.learn(optima, np.zeros((3, 6)))   # the law's ln N* = 0 at every budget
    assert disc.dof == 4 and disc.coef[1] == pytest.approx(0.1, abs=0.03) and disc.scatter < 0.1
    query = np.array([1e19, 1e24])
    m, sd = disc.mean_sd(query)
    d = disc.draws(query, 40000, seed=0)
    for j in range(2):
        q = np.quantile(d[:, j], [0.1, 0.5, 0.9])
        np.testing.assert_allclose(q, m[j] + sd[j] * stats.t.ppf([0.1, 0.5, 0.9], disc.dof),
                                   atol=0.02 * (1 + sd[j]))
    assert sd[1] > 1.5 * sd[0]  # 4.5 decades beyond the profiles' centre: less sure
    with pytest.raises(bs.BayescaleError, match="needs 3 measured optima"):
        OptimumDiscrepancy.learn(optima.iloc[:2], np.zeros((3, 2)))
