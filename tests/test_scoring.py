"""Scores of held-out predictions on hand-checkable cases (bayescale.scoring, Fit/ModelAverage log densities)."""

import numpy as np
import pytest
from scipy import stats

import bayescale as bs
from bayescale import scoring


def test_rmsle_perfect_and_known_ratio():
    y = np.array([0.5, 0.2, 0.1])
    assert scoring.rmsle(y, y) == 0.0
    # every prediction off by a factor e: RMSLE exactly 1
    assert scoring.rmsle(y * np.e, y) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="> 0"):
        scoring.rmsle([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        scoring.rmsle([1.0], [1.0, 2.0])


def test_gaussian_coverage_msce_width_crps():
    rng = np.random.default_rng(0)
    m = 20000
    y = rng.normal(0.0, 1.0, m)
    levels = np.array(scoring.MSCE_LEVELS)
    z = stats.norm.ppf((1 + levels) / 2)
    lo, hi = -z[:, None] * np.ones(m), z[:, None] * np.ones(m)
    cov = scoring.coverage(lo, hi, y)
    assert cov.shape == levels.shape
    assert np.all(np.abs(cov - levels) < 4 * np.sqrt(levels * (1 - levels) / m))
    assert scoring.msce(levels, cov) < 1e-4
    assert scoring.msce(levels, np.ones_like(levels)) == pytest.approx(np.mean((1 - levels) ** 2))
    assert scoring.interval_width(lo[4], hi[4]) == pytest.approx(2 * stats.norm.ppf(0.95))
    # sample CRPS from many draws approaches the closed form
    draws = rng.normal(0.3, 1.5, size=(20000, 3))
    obs = np.array([-1.0, 0.3, 2.0])
    assert np.allclose(scoring.crps_from_draws(draws, obs), scoring.crps_gaussian(0.3, 1.5, obs), atol=0.02)
    # a point mass: CRPS = |x - y|
    assert np.allclose(scoring.crps_from_draws(np.full((5, 2), 1.0), np.array([1.0, 3.0])), [0.0, 2.0])


def test_lognormal_mixture_and_units():
    y = np.array([0.3, 0.5, 0.9])
    lm, sd = np.log([0.35, 0.5, 0.8]), 0.2
    exact = stats.lognorm(s=sd, scale=np.exp(lm)).logpdf(y)
    assert np.allclose(scoring.lognormal_mixture_logpdf(y, lm[None, :], np.array([sd])), exact)
    # two identical components = one
    assert np.allclose(scoring.lognormal_mixture_logpdf(y, np.stack([lm, lm]), np.array([sd, sd])), exact)
    # log-Student-t components: ln y ~ t(df, lm, sd), density in y units
    t_exact = stats.t(3.0, lm, sd).logpdf(np.log(y)) - np.log(y)
    assert np.allclose(scoring.lognormal_mixture_logpdf(y, lm[None, :], np.array([sd]), df=3.0), t_exact)
    # y' = y / c: density rises by log c
    c = 4.0
    scaled = stats.lognorm(s=sd, scale=np.exp(lm) / c).logpdf(y / c)
    assert np.allclose(scoring.rescale_log_density(exact, c), scaled)


def test_fit_log_predictive_density_matches_draws(chinchilla_fit):
    """log mean_s [t_df(ln y; ln mu_s, sigma_s) / y] (the default log-Student-t noise) computed by hand from the
    posterior draws (the raw posterior: the extrapolation error's draws are the predictive's own)."""
    f = chinchilla_fit.with_error(None)
    assert f.likelihood == "logstudentt"
    at = {"N": [2e9, 5e9], "D": [2e11, 4e11]}
    frame, mu, _ = f.predictive_draws(at, max_draws=500)
    y = np.median(mu, axis=0) * 1.01
    sig = f.draws(500)["sigma"]
    by_hand = scoring.log_mean_exp(stats.t(f.df, np.log(mu), sig[:, None]).logpdf(np.log(y)[None, :]) - np.log(y),
                                   axis=0)
    got = f.log_predictive_density(at, y, max_draws=500)
    assert got.shape == (2,)
    assert np.allclose(got, by_hand)
    with pytest.raises(ValueError, match="one per query point"):
        f.log_predictive_density(at, y[:1])
    avg = bs.ModelAverage({"a": f, "b": f}, {"a": 0.3, "b": 0.7})
    assert np.allclose(avg.log_predictive_density(at, y, max_draws=500), got)
