"""Model weights by extrapolation: leave-future-out stacking is the default; PSIS-LOO stays available."""

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pandas as pd
import pytest
from conftest import FAST

import bayescale as bs

# a log-log quadratic: it follows curvature inside the runs well and extrapolates it
LOGQUAD = bs.Law(
    name="test_logquad", formula="ln y = a - c ln x + q (ln x)^2", inputs=(bs.Input("x", "size"),),
    params=(bs.Param("a", lambda s: dist.Normal(jnp.log(s.y_med), 2.0), "log level at the centre"),
            bs.Param("c", lambda s: dist.Normal(0.0, 1.0), "slope"),
            bs.Param("q", lambda s: dist.Normal(0.0, 0.2), "curvature")),
    mean=lambda p, t: jnp.exp(p["a"] - p["c"] * t["x"] + p["q"] * t["x"] ** 2), description="test", reference="-")


def truth(x):
    """A power law whose slope steepens from 0.1 to 0.35 around x = 1e7, early in the runs."""
    return 10 * x**-0.1 * (1 + (x / 1e7) ** (1 / 0.3)) ** (-0.25 * 0.3)


@pytest.fixture(scope="module")
def fits():
    bs.register_law(LOGQUAD, overwrite=True)
    try:
        x = np.geomspace(1e6, 1e10, 16)
        runs = pd.DataFrame({"x": x, "y": truth(x) * np.exp(np.random.default_rng(1).normal(0, 0.01, x.size))})
        yield {n: bs.fit(runs, n, x="x", y="y", seed=0, **FAST) for n in ("M1", "test_logquad")}
    finally:
        bs.laws.LAWS.pop("test_logquad")


def test_weights_follow_extrapolation_not_in_sample_fit(fits):
    """LOO prefers the quadratic (it fits the early bend); leave-future-out prefers the power law, which predicts
    runs 10x and 100x beyond the data better; the default average follows leave-future-out."""
    big = np.array([1e11, 1e12])
    err = {n: np.abs(np.log(f.predict({"x": big}, seed=0)["curve_median"].values / truth(big))).mean()
           for n, f in fits.items()}
    assert err["M1"] < err["test_logquad"]
    loo = bs.compare(fits, ic="loo")
    assert loo.attrs["ic"] == "loo" and loo.loc["test_logquad", "weight"] > 0.9
    avg = bs.model_average(fits)
    assert avg.table.attrs["ic"] == "lfo" and avg.weights["M1"] > 0.9
    assert avg.runs is fits["M1"].runs  # what compute_optimal(avg, profiles="auto") searches for isoFLOP profiles


def test_ic_is_checked_and_pymc_like_fits_fall_back_to_loo(fits):
    with pytest.raises(ValueError, match="ic must be one of"):
        bs.compare(fits, ic="waic")

    class NotRefittable:
        refittable = False

    from bayescale.compare import ICS, resolve_ic

    assert "auto" in ICS
    assert resolve_ic({"a": NotRefittable(), "b": fits["M1"]}, "auto") == "loo"
    assert resolve_ic(fits, "auto") == "lfo"
