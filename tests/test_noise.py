"""Every noise model (``bayescale.noise.LIKELIHOODS``), one row each: its density is a distribution, its draws follow
it, and its sd of ln y is what the extrapolation error and the bands take it to be. A new likelihood is one branch
in ``noise.py`` plus one row here."""

import numpy as np
import pytest
from scipy.integrate import trapezoid

import bayescale as bs
from bayescale import noise
from bayescale.simulate import simulate
from tests.conftest import FAST

# likelihood -> (mean mu, noise scale sigma) it is checked at (beta: a metric in [0, 1])
CASES = {
    "lognormal": (2.0, 0.05),
    "normal": (2.0, 0.1),
    "studentt": (2.0, 0.1),
    "logstudentt": (2.0, 0.05),
    "beta": (0.3, 0.1),
}


def test_every_likelihood_has_a_row():
    assert set(CASES) == set(noise.LIKELIHOODS)


def _grid(likelihood, mu):
    return np.linspace(1e-6, 1 - 1e-6, 400_001) if likelihood == "beta" else np.linspace(1e-3, 3 * mu, 400_001)


@pytest.mark.parametrize("likelihood", list(CASES))
def test_density_integrates_to_one_and_draws_follow_it(likelihood):
    mu, sigma = CASES[likelihood]
    y = _grid(likelihood, mu)
    p = np.exp(noise.log_prob(likelihood, y, mu, sigma))
    assert trapezoid(p, y) == pytest.approx(1.0, abs=2e-3)
    draws = noise.sample(likelihood, np.full(20_000, mu), sigma, seed=0)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(y))])
    for q in np.quantile(draws, [0.05, 0.25, 0.5, 0.75, 0.95]):   # empirical quantiles sit at the density's
        assert np.interp(q, y, cdf) == pytest.approx(np.mean(draws <= q), abs=0.015)


@pytest.mark.parametrize("likelihood", list(CASES))
def test_a_fits_noise_density_is_scipys(likelihood):
    """The density a fit's model uses (its ``df`` a number; Student-t's normalising constant and beta's ln Gamma
    computed outside XLA's expansions) against SciPy's, over a wide range of means and scales."""
    from scipy import stats

    mu, sigma = CASES[likelihood]
    for scale in (0.02, 1.0, 3.0):
        s = sigma * scale
        y = _grid(likelihood, mu)[::4000]
        got = np.asarray(noise.noise_dist(likelihood, mu, s, df=4.0).log_prob(y))
        if likelihood == "beta":
            m = noise.SQUEEZE + (1 - 2 * noise.SQUEEZE) * mu
            phi = 1 / min(s**2, noise.MAX_REL_SD**2) - 1
            want = stats.beta(m * phi, (1 - m) * phi, loc=-noise.SQUEEZE / (1 - 2 * noise.SQUEEZE),
                              scale=1 / (1 - 2 * noise.SQUEEZE)).logpdf(y)
        else:
            want = {"lognormal": stats.lognorm(s, scale=mu).logpdf(y),
                    "normal": stats.norm(mu, s).logpdf(y),
                    "studentt": stats.t(4.0, mu, s).logpdf(y),
                    "logstudentt": stats.t(4.0, np.log(mu), s).logpdf(np.log(y)) - np.log(y)}[likelihood]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=f"{likelihood} at scale {s}")


@pytest.mark.parametrize("likelihood", [k for k in CASES if k != "beta"])
def test_log_sd_is_the_sd_of_ln_y(likelihood):
    """``log_sd`` (the noise's sd of ln y, what the extrapolation error adds to) matches the draws'; beta's is a
    delta-method approximation, checked by its own formula's definition elsewhere."""
    mu, sigma = CASES[likelihood][0], 0.02 * CASES[likelihood][0]   # y-unit noise: no negative draws
    ln = np.log(noise.sample(likelihood, np.full(200_000, mu), sigma, seed=1))
    assert float(noise.log_sd(likelihood, mu, sigma)) == pytest.approx(ln.std(), rel=0.1)


@pytest.mark.parametrize("likelihood", noise.LOG_SCALE)
def test_log_scale_noise_refuses_non_positive_outcomes_by_row(likelihood):
    runs = simulate("M2", 1, seed=0)[0].assign(y=lambda d: d.y.where(d.index != 4, 0.0))
    with pytest.raises(bs.RunTableError, match=f"{likelihood}.*row 4 "):
        bs.fit(runs, "M2", x="x", y="y", likelihood=likelihood, **FAST)


def test_robust_multiplicative_noise_is_not_dragged_by_outlying_runs():
    """The smallest run off by a factor 1.3 (a logging slip): under log-Student-t noise the exponent stays near the
    truth and the clean runs' bands stay narrow, where lognormal noise tilts the curve toward the outlier and widens
    every band."""
    runs, truth = simulate("M2", 1, seed=3)
    runs = runs[~runs.held_out].reset_index(drop=True)
    bad = [0]
    runs.loc[bad, "y"] *= 1.3
    clean = runs.drop(index=bad)
    err = {}
    for lik in ("lognormal", "logstudentt"):
        f = bs.fit(runs, "M2", x="x", y="y", likelihood=lik, seed=0, **FAST)
        if lik == "logstudentt":  # it names the outlying run, and suggests no other noise model
            assert any("Check that row" in w for w in f.warnings) and not any("likelihood=" in w for w in f.warnings)
        err[lik] = abs(float(np.median(f.draws()["c"])) - truth["c"])
        b = f.predict(clean[["x"]], levels=(0.9,), raw=True)
        err[lik + " width"] = float(np.median(np.log(b["run_upper"].sel(level=0.9) / b["run_lower"].sel(level=0.9))))
    assert err["logstudentt"] < 0.5 * err["lognormal"]
    assert err["logstudentt width"] < 0.6 * err["lognormal width"]


def test_outlying_runs_under_lognormal_noise_point_to_the_robust_likelihood():
    """The bundled Chinchilla runs below 1e21 FLOP include runs far off the law (Besiroglu et al. 2024 fit them with
    a Huber loss); the lognormal fit names them and says which likelihood would let them weigh less."""
    runs = bs.datasets.chinchilla()
    f = bs.fit(runs[runs.C < 1e21], "chinchilla", inputs={"N": "N", "D": "D"}, y="loss", likelihood="lognormal",
               seed=0, **FAST)
    hint = [w for w in f.warnings if "likelihood='logstudentt'" in w]
    assert len(hint) == 1 and "--likelihood logstudentt" in hint[0]


def test_each_noise_model_predicts_with_the_error_model_of_its_kind():
    """A fit predicts beyond its runs with the error model learned on the held-out errors of fits with its own noise
    model (one without its own takes that of its kind: beta the lognormal fits', studentt the robust fits'); the
    default noise is the robust one."""
    from bayescale.error_model import default_error_model
    from bayescale.runs import fitted_span

    runs = simulate("M2", 1, seed=3)[0]
    runs = runs[~runs.held_out]
    robust, plain = default_error_model(), default_error_model("lognormal")
    assert "logstudentt fits" in robust.source and "lognormal fits" in plain.source and robust != plain
    assert default_error_model("beta") == plain and default_error_model("studentt") == robust
    for lik, model in ((None, robust), ("lognormal", plain)):
        f = bs.fit(runs, "M2", x="x", y="y", seed=0, **({} if lik is None else {"likelihood": lik}), **FAST)
        assert f.likelihood == (lik or "logstudentt")
        own, how = f.own_errors()
        expect = model.posterior("M2", fitted_span(f.law, f.scales), f.noise_level, own, how)
        assert f.error == expect
