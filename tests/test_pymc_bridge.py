"""fit_pymc: a PyMC model sampled through PyMC's NumPyro route, with bayescale diagnostics, bands and LOO.

The model is the one-input law M2, y = E + A * N^-alpha with multiplicative (log-normal) noise, written in PyMC
in the same centred form bayescale uses (A at the data centre), fitted to data simulated from known parameters.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest

pm = pytest.importorskip("pymc")

import bayescale as bs  # noqa: E402
from bayescale.pymc_bridge import PyMCFit  # noqa: E402

TRUE = {"E": 1.7, "A": 400.0, "alpha": 0.34, "sigma": 0.03}
SMALL = {"chains": 2, "warmup": 300, "samples": 300}


def law_mean(N, p=TRUE):
    return p["E"] + p["A"] * np.asarray(N, float) ** -p["alpha"]


def simulate(N, rng, p=TRUE):
    return law_mean(N, p) * np.exp(p["sigma"] * rng.standard_normal(len(N)))


def power_law_model(N, y, name: str = "", shape: bool = True) -> pm.Model:
    """M2 in PyMC: the inputs are pm.Data, the mean a Deterministic 'mu', the observed 'y' with shape=mu.shape."""
    c = float(np.log(N).mean())
    y_med = float(np.median(y))
    with pm.Model(name=name) as model:
        n = pm.Data("N", np.asarray(N, float))
        E = pm.Uniform("E", 0.0, float(np.min(y)))
        a = pm.Normal("a", math.log(y_med) - 1.0, 1.5)          # ln of the reducible term at the data centre
        alpha = pm.LogNormal("alpha", math.log(0.3), 0.8)
        sigma = pm.HalfNormal("sigma", 0.2)
        mu = pm.Deterministic("mu", E + pm.math.exp(a - alpha * (pm.math.log(n) - c)))
        pm.LogNormal("y", pm.math.log(mu), sigma, observed=np.asarray(y, float),
                     **({"shape": mu.shape} if shape else {}))
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(20240611)
    N = np.geomspace(1e6, 1e9, 14)
    return N, simulate(N, rng)


@pytest.fixture(scope="module")
def pfit(data):
    N, y = data
    return bs.fit_pymc(power_law_model(N, y), inputs=["N"], seed=1, **SMALL)


# -- fit and diagnostics -------------------------------------------------------------------------------


def test_fit_is_a_fit_with_diagnostics(pfit):
    assert isinstance(pfit, PyMCFit) and isinstance(pfit, bs.Fit)
    assert pfit.param_names == ["E", "a", "alpha", "sigma"]
    assert pfit.law.name.startswith("pymc:")
    assert pfit.law.name.lower() not in bs.laws.LAWS  # not registered
    d = pfit.diagnostics
    assert list(d["table"].index) == pfit.param_names
    assert np.isfinite(d["max_rhat"]) and d["max_rhat"] < 1.2
    assert np.isfinite(d["min_ess_bulk"]) and d["min_ess_bulk"] > 0
    assert (d["chains"], d["draws"]) == (2, 300)
    assert isinstance(d["divergences"], int)
    assert len(d["bfmi"]) == 2 and all(np.isfinite(d["bfmi"]))
    assert np.isfinite(d["mean_steps"]) and d["mean_steps"] >= 1
    assert isinstance(pfit.ok, bool) and isinstance(pfit.warnings, list)
    assert "pymc:" in repr(pfit)
    s = pfit.summary()
    assert list(s.index) == pfit.param_names  # natural=None: no published-form rows
    for name in ("E", "alpha", "sigma"):  # the simulated truth is within a few posterior sds
        assert abs(s.loc[name, "mean"] - TRUE[name]) < 4 * s.loc[name, "sd"], name


def test_datatree_groups(pfit, data):
    tree = pfit.idata
    for group in ("posterior", "sample_stats", "log_likelihood", "observed_data"):
        assert group in tree.children, group
    for stat in ("diverging", "energy", "n_steps"):
        assert stat in tree["sample_stats"].data_vars
    assert list(tree["log_likelihood"].data_vars) == ["y"]
    np.testing.assert_allclose(tree["observed_data"]["y"].values, data[1])
    np.testing.assert_allclose(pfit.runs["N"].to_numpy(), data[0])
    assert pfit.scales.center["N"] == pytest.approx(np.log(data[0]).mean())


def test_loo(pfit, data):
    loo = pfit.loo()
    assert np.isfinite(loo.elpd)
    assert loo.n_data_points == len(data[0])


# -- prediction ----------------------------------------------------------------------------------------


def test_predict_bands(pfit, data):
    N, _ = data
    i = len(N) // 2
    at = {"N": [N[i], 1e10]}
    b = pfit.predict(at, seed=3)
    assert isinstance(b, bs.Bands)
    assert b.levels == [0.5, 0.8, 0.9, 0.95]
    lo, hi = b.interval(0.9)
    med = b["run_median"].values
    assert np.all(lo <= med) and np.all(med <= hi)
    raw = pfit.predict(at, seed=3, raw=True)  # without the heavy-tailed extrapolation error's Monte Carlo noise
    (rlo, rhi), (clo, chi) = raw.interval(0.9), raw.interval(0.9, "curve")
    assert np.all(rlo <= clo) and np.all(chi <= rhi)  # a new run is wider than the mean curve
    # At a training point the median is near the simulated truth: within half the 90% run interval.
    truth = law_mean(N[i])
    assert abs(b["curve_median"].values[0] - truth) <= (hi[0] - lo[0]) / 2
    assert abs(med[0] - truth) <= (hi[0] - lo[0]) / 2
    # Inside the data vs one decade beyond it.
    assert list(b["extrapolation"].values) == [False, True]
    assert b["beyond"].values[1] == pytest.approx(1.0)
    # Same seed, same draws; the model's training data are restored after predicting.
    assert np.array_equal(pfit.predict(at, seed=3)["run_lower"].values, b["run_lower"].values)
    np.testing.assert_allclose(pfit.model["N"].get_value(), N)


def test_predictive_draws_shapes_and_max_draws(pfit):
    frame, mu, obs = pfit.predictive_draws({"N": [1e6, 1e7, 1e8]}, seed=0, max_draws=100)
    assert list(frame.columns) == ["N"] and len(frame) == 3
    assert mu.shape == obs.shape == (100, 3)
    assert np.all(mu > TRUE["E"] * 0.5) and np.all(obs > 0)
    # mu decreases with N in every draw (alpha > 0).
    assert np.all(np.diff(mu, axis=1) < 0)


def test_plot_and_save(pfit, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    ax = pfit.plot(path=tmp_path / "fit.png")
    assert (tmp_path / "fit.png").stat().st_size > 0
    assert ax.get_xscale() == "log"
    with pytest.raises(NotImplementedError, match="to_netcdf"):
        pfit.save(tmp_path / "fit.nc")


def test_compare_and_average_with_native_fit(data):
    N, y = data
    # Name the PyMC input "x" after the native one-input laws' input (the pm.Data container stays "N"), so that
    # model_average can mix the two routes' query frames; both accept at={"N": ...} through their column maps.
    pfit = bs.fit_pymc(power_law_model(N, y), inputs={"x": "N"}, seed=1, **SMALL)
    assert pfit.law.input_names == ("x",) and pfit.columns["x"] == "N"
    native = bs.fit(pd.DataFrame({"N": N, "loss": y}), "M2", x="N", y="loss", seed=0, **SMALL)
    table = bs.compare({"pymc": pfit, "native": native})
    assert set(table.index) == {"pymc", "native"}
    assert table["weight"].sum() == pytest.approx(1.0)
    # Same law, similar priors: the two routes agree on the expected log predictive density.
    assert abs(table.loc["pymc", "elpd"] - table.loc["native", "elpd"]) < 2 * table["se"].max()
    avg = bs.model_average({"pymc": pfit, "native": native})
    b = avg.predict({"N": [1e7, 1e10]}, n_draws=400)
    lo, hi = b.interval(0.9)
    assert np.all(lo < hi)


# -- input checks (no sampling) --------------------------------------------------------------------------


def test_observed_without_mu_shape_is_rejected(data):
    N, y = data
    with pytest.raises(ValueError, match=r"shape=mu\.shape"):
        bs.fit_pymc(power_law_model(N, y, shape=False), inputs=["N"], **SMALL)


def test_unknown_names_are_rejected(data):
    N, y = data
    model = power_law_model(N, y)
    with pytest.raises(ValueError, match="no variable 'D'"):
        bs.fit_pymc(model, inputs=["D"], **SMALL)
    with pytest.raises(ValueError, match="pm.Data"):
        bs.fit_pymc(model, inputs=["alpha"], **SMALL)
    with pytest.raises(ValueError, match="Deterministic"):
        bs.fit_pymc(model, inputs=["N"], mu="alpha", **SMALL)
    with pytest.raises(ValueError, match="observed"):
        bs.fit_pymc(model, inputs=["N"], y="mu", **SMALL)
    with pytest.raises(TypeError, match="pymc.Model"):
        bs.fit_pymc(object(), inputs=["N"])


def test_missing_pymc_message(monkeypatch, data):
    monkeypatch.setitem(sys.modules, "pymc", None)
    with pytest.raises(ImportError, match=r"pip install 'bayescale\[pymc\]'"):
        bs.fit_pymc(None, inputs=["N"])


# -- calibration ------------------------------------------------------------------------------------------


def _coverage(n_sets: int, n_train: int, n_held: int, levels, settings: dict, seed: int) -> dict:
    """Fraction of held-out runs (inside the data and up to one decade beyond) inside each central run interval.

    Each dataset has its own true parameters, drawn at random, and its own noisy held-out runs.
    """
    rng = np.random.default_rng(seed)
    hits = {lv: [] for lv in levels}
    for k in range(n_sets):
        p = {"E": rng.uniform(1.0, 3.0), "A": math.exp(rng.uniform(4.0, 7.0)), "alpha": rng.uniform(0.2, 0.5),
             "sigma": rng.uniform(0.01, 0.05)}
        N = np.geomspace(1e6, 1e9, n_train)
        y = simulate(N, rng, p)
        N_new = np.exp(rng.uniform(np.log(1e6), np.log(1e10), n_held))
        y_new = simulate(N_new, rng, p)
        # A named model: the bridge resolves "N", "mu" and "y" under the model's prefix.
        f = bs.fit_pymc(power_law_model(N, y, name=f"sim{k}"), inputs=["N"], seed=k, **settings)
        b = f.predict({"N": N_new}, levels=levels, seed=k)
        for lv in levels:
            hits[lv].append(b.covers(y_new, lv))
    return {lv: float(np.concatenate(h).mean()) for lv, h in hits.items()}


def test_coverage_cheap():
    cov = _coverage(n_sets=4, n_train=12, n_held=10, levels=[0.9], settings=SMALL, seed=7)
    assert 0.7 <= cov[0.9] <= 1.0


@pytest.mark.slow
def test_coverage_full():
    # 500 held-out runs: the binomial sd of a 90% coverage is 0.013, of a 50% one 0.022.
    cov = _coverage(n_sets=25, n_train=12, n_held=20, levels=[0.5, 0.9], seed=11,
                    settings={"chains": 4, "warmup": 500, "samples": 500})
    assert 0.85 <= cov[0.9] <= 0.95
    assert 0.42 <= cov[0.5] <= 0.58
