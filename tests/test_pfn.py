"""The PFN extrapolator: prior sampler, bar distribution, training, weights loading, predict -> Bands, CLI.

Training here uses the ``tiny`` config for a few dozen steps (behaviour, not quality); the quality of the shipped
weights is measured by ``benchmarks/pfn.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.errors import RunTableError, SettingError
from bayescale.pfn.bar import BarDistribution
from bayescale.pfn.calibrate import CALIB_SEED, fit_map
from bayescale.pfn.infer import Predictive, load, predict, predictive, predictive_many
from bayescale.pfn.network import CONFIGS, PFN
from bayescale.pfn.prior import FAMILIES, MIN_CONTEXT, normalize, sample_prior
from bayescale.pfn.recalibration import KINDS, Recalibration
from bayescale.pfn.weights import (PFNWeightsError, read_weights, replace_arrays, save_weights, sha256, tree_arrays,
                                   weights_path)
from conftest import traces


# ------------------------------------------------------------------------------------------------ prior


@pytest.fixture(scope="module")
def draws():
    return {k: np.asarray(v) for k, v in sample_prior(0, 128, 32).items()}


def test_prior_shapes_and_ranges(draws):
    d = draws
    for k in ("t", "y", "mu", "valid", "ctx", "target"):
        assert d[k].shape == (128, 32), k
    assert d["t"].dtype == np.float64 and d["y"].dtype == np.float64
    assert d["family"].shape == (128,) and set(np.unique(d["family"])) <= set(range(len(FAMILIES)))
    v = d["valid"]
    assert np.all(np.isfinite(d["y"][v])) and np.all(d["y"][v] > 0) and np.all(d["mu"][v] > 0)
    assert np.all(np.diff(d["t"], axis=1) >= 0)  # ln x sorted
    assert np.all(d["target"] == (v & ~d["ctx"])) and not np.any(d["ctx"] & ~v)
    assert np.all(d["ctx"].sum(1) >= MIN_CONTEXT)
    assert np.all(d["sigma"] >= 0)
    assert d["target"].sum() > 0 and 0 < d["bump"].mean() < 1


def test_prior_reproducible_and_seeded(draws):
    again = {k: np.asarray(v) for k, v in sample_prior(0, 128, 32).items()}
    for k in draws:
        np.testing.assert_array_equal(draws[k], again[k])
    other = np.asarray(sample_prior(1, 128, 32)["y"])
    assert not np.allclose(other, draws["y"])
    # a JAX key works as the seed too
    np.testing.assert_array_equal(np.asarray(sample_prior(jax.random.PRNGKey(0), 128, 32)["y"]), draws["y"])


def test_one_compiled_prior_serves_every_split(draws):
    """The context's kind is an input of the compiled prior sampler, not part of it (each compile is seconds):
    after the first split at a shape (``draws``: mixed), the others trace (hence compile) nothing."""
    with traces() as traced:
        for split in ("prefix", "random"):
            sample_prior(7, 128, 32, split=split)["y"].block_until_ready()
    assert not traced


def test_prior_splits_and_families():
    d = {k: np.asarray(v) for k, v in sample_prior(3, 128, 32, split="prefix").items()}
    for i in range(128):  # prefix: every target lies beyond every context point
        if d["target"][i].any():
            assert d["t"][i][d["ctx"][i]].max() <= d["t"][i][d["target"][i]].min()
    r = {k: np.asarray(v) for k, v in sample_prior(3, 128, 32, split="random").items()}
    interleaved = [r["target"][i].any() and r["t"][i][r["target"][i]].min() < r["t"][i][r["ctx"][i]].max()
                   for i in range(128)]
    assert np.mean(interleaved) > 0.5  # random subsets interpolate
    one = sample_prior(4, 32, 16, families=["M2"], bump_share=0.0)
    assert np.all(np.asarray(one["family"]) == 0) and not np.any(np.asarray(one["bump"]))


def test_prior_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        sample_prior(0, 4, 16, split="middle")
    with pytest.raises(ValueError, match="unknown prior families"):
        sample_prior(0, 4, 16, families=["chinchilla"])
    with pytest.raises(ValueError, match="n_points"):
        sample_prior(0, 4, 2)


@pytest.mark.parametrize("family", ["M2", "sigmoid"])
def test_family_model_matches_prior_draws(family):
    """The NumPyro model of one family's prior draws what sample_prior draws (two-sample KS on 2000 curves)."""
    from numpyro.infer import Predictive
    from scipy.stats import ks_2samp

    from bayescale.pfn.prior import family_model

    n = 2000
    d = {k: np.asarray(v) for k, v in sample_prior(5, n, 20, split="prefix", families=[family], bump_share=0.0,
                                                   wide_noise_share=0.0).items()}
    model = family_model(family)
    one = lambda k, t, c: Predictive(model, num_samples=1)(k, t, c)["y"][0]  # noqa: E731
    ym = np.asarray(jax.vmap(one)(jax.random.split(jax.random.PRNGKey(1), n), jnp.asarray(d["t"]),
                                  jnp.asarray(d["ctx"])))
    r = np.arange(n)
    first, last = np.argmax(d["valid"], 1), d["valid"].shape[1] - 1 - np.argmax(d["valid"][:, ::-1], 1)

    def stats(y):  # level at the far end, rise/fall over the curve, roughness (sensitive to the noise prior)
        ly = np.log(y)
        return (ly[r, last], ly[r, last] - ly[r, first], np.median(np.abs(np.diff(ly, 2, axis=1)), axis=1))

    for a, b in zip(stats(d["y"]), stats(ym)):
        assert ks_2samp(a, b).pvalue > 1e-3
    with pytest.raises(ValueError, match="unknown prior family"):
        family_model("M9")


def test_normalize_uses_context_only(draws):
    d = draws
    u, z, (t0, tspan, m, s) = normalize(d["t"], d["y"], d["ctx"], xp=np)
    for i in range(10):
        c = d["ctx"][i]
        assert np.isclose(u[i][c].min(), 0) and np.isclose(u[i][c].max(), 1)
        assert abs(z[i][c].mean()) < 1e-9 and np.isclose(z[i][c].std(), 1, atol=1e-9)
    y2 = np.where(d["target"], d["y"] * 7.0, d["y"])  # change only the points to predict
    _, _, st2 = normalize(d["t"], y2, d["ctx"], xp=np)
    np.testing.assert_allclose(st2[2], m)
    np.testing.assert_allclose(st2[3], s)


# ------------------------------------------------------------------------------------------------ bar distribution


def test_bar_logpdf_is_a_density():
    bar = BarDistribution(jnp.asarray(np.sort(np.random.default_rng(0).normal(size=33)) * 2))
    log_probs = jax.nn.log_softmax(jnp.asarray(np.random.default_rng(1).normal(size=(3, 32))))
    grid = jnp.linspace(-40, 40, 400001)
    dens = jnp.exp(jax.vmap(lambda g: bar.logpdf(log_probs, jnp.full((3,), g)))(grid))
    mass = np.asarray(jnp.trapezoid(dens, grid, axis=0))
    np.testing.assert_allclose(mass, 1.0, atol=2e-3)


@pytest.mark.parametrize("start, step, n", [
    ((-30.0, -2.0, 1.5), (0.1, 0.003, 0.02), 601),   # from the left tail through every bin, inside, from inside out
    ((-5.0, 0.3, 30.0), (0.0125, 1e-4, 1.0), 1001),  # grid points on borders, a narrow grid, all in the right tail
])
def test_bar_cdf_grid_is_cdf_on_the_grid(start, step, n):
    """cdf_grid (borders placed on the grid, sums along it) equals cdf at every grid point, tails included, and sums
    the rows that share an output row."""
    rng = np.random.default_rng(5)
    borders = np.sort(np.r_[rng.normal(size=40) * 3, -5.0 + 0.0125 * 400])  # one border exactly on a grid point
    probs = rng.dirichlet(np.ones(40), size=3)
    bar = BarDistribution(borders)
    start, step = np.array(start), np.array(step)
    z = start + step * np.arange(n)[:, None]  # (n, 3)
    want = bar.cdf(probs, z).T
    np.testing.assert_allclose(bar.cdf_grid(probs, start, step, n), want, atol=1e-12)
    rows = bar.prepare(np.concatenate([probs, probs[::-1]]))
    both = bar.cdf_grid(rows, np.r_[start, start[::-1]], np.r_[step, step[::-1]], n, into=[0, 1, 2, 2, 1, 0])
    np.testing.assert_allclose(both, 2 * want, atol=1e-12)


def test_bar_cdf_quantile_logpdf_one_distribution():
    """cdf is monotone from 0 to 1, quantile inverts it, logpdf is its derivative; NumPy and JAX logpdf agree."""
    rng = np.random.default_rng(3)
    borders = np.sort(rng.normal(size=41)) * 3
    probs = rng.dirichlet(np.ones(40), size=3)
    bar = BarDistribution(borders)
    assert bar.n_bins == 40 and bar.xp is np
    z = np.linspace(-30, 30, 20001)
    f = np.stack([bar.cdf(probs, np.full(3, zi)) for zi in z])  # (n, 3)
    assert np.all(np.diff(f, axis=0) >= 0) and np.all(f[0] < 1e-6) and np.all(f[-1] > 1 - 1e-6)
    q = np.array([1e-4, 0.01, 0.3, 0.5, 0.77, 0.99, 1 - 1e-4])
    zq = bar.quantile(probs, q)
    assert zq.shape == (7, 3) and np.all(np.diff(zq, axis=0) > 0)
    for i, qi in enumerate(q):
        np.testing.assert_allclose(bar.cdf(probs, zq[i]), qi, atol=1e-10)
    np.testing.assert_allclose(bar.quantile(probs, np.repeat(q[:, None], 3, 1)), zq)  # per-row levels
    lp = np.log(probs)
    for zz in (zq[0] - 0.5, zq[2], zq[4], zq[6] + 0.5):  # both tails and inner bins
        h = 1e-6
        np.testing.assert_allclose((bar.cdf(probs, zz + h) - bar.cdf(probs, zz - h)) / (2 * h),
                                   np.exp(bar.logpdf(lp, zz)), rtol=1e-4)
    jbar = BarDistribution(jnp.asarray(borders))
    assert jbar.xp is jnp
    zs = jnp.asarray(np.stack([zq[0] - 0.5, zq[3], zq[6] + 0.5]))
    np.testing.assert_allclose(np.asarray(jbar.logpdf(jnp.asarray(np.broadcast_to(lp, (3, 3, 40))), zs)),
                               np.stack([bar.logpdf(lp, np.asarray(r)) for r in zs]), rtol=1e-12)


def test_training_loss_is_minus_bar_logpdf():
    """The training loss is the mean -logpdf of the target points under the same BarDistribution."""
    from bayescale.pfn.train import nll

    cfg = CONFIGS["tiny"]
    model = PFN(cfg, jax.random.PRNGKey(0))
    d = sample_prior(1, 4, cfg.n_points, families=["M2"])
    u, z, _ = normalize(d["t"], d["y"], d["ctx"])
    borders = jnp.asarray(np.linspace(-4, 4, cfg.n_bins + 1), jnp.float32)
    loss = float(nll(model, borders, u, z, d["ctx"], d["target"]))
    logits = jax.vmap(model)(u, z, d["ctx"])
    lp = np.asarray(BarDistribution(borders).logpdf(jax.nn.log_softmax(logits), z.astype(jnp.float32)))
    t = np.asarray(d["target"])
    np.testing.assert_allclose(loss, -lp[t].mean(), rtol=1e-5)


def test_keys_from_the_leading_context_give_the_same_logits():
    """Inference reads attention keys from the leading context positions only: the logits of every token are those
    of the full masked attention, with the context first, padding between it and the queries, and up to 40 queries."""
    cfg = CONFIGS["tiny"]
    model = PFN(cfg, jax.random.PRNGKey(1))
    rng = np.random.default_rng(0)
    n_keys, n_tok = 16, 56
    ctx = np.zeros((3, n_tok), bool)
    for row, n_ctx in enumerate((5, 11, 16)):
        ctx[row, :n_ctx] = True
    u = jnp.asarray(rng.uniform(0, 2, (3, n_tok)), jnp.float32)
    z = jnp.asarray(rng.normal(size=(3, n_tok)), jnp.float32)
    full = jax.vmap(model)(u, z, jnp.asarray(ctx))
    short = jax.vmap(lambda *a: model(*a, n_keys))(u, z, jnp.asarray(ctx))
    np.testing.assert_allclose(np.asarray(short), np.asarray(full), rtol=1e-5, atol=1e-5)
    # a context token beyond n_keys would be missed: the contract is the caller's, and the difference shows
    ctx[0, n_keys + 2] = True
    moved = jax.vmap(lambda *a: model(*a, n_keys))(u, z, jnp.asarray(ctx))
    assert not np.allclose(np.asarray(moved[0]), np.asarray(jax.vmap(model)(u, z, jnp.asarray(ctx))[0]), atol=1e-4)


def test_predictive_quantile_cdf_logpdf_consistent():
    rng = np.random.default_rng(2)
    borders = np.sort(rng.normal(size=65)) * 3
    probs = rng.dirichlet(np.ones(64), size=4)
    p = Predictive(probs, borders, loc=np.log(2.0), scale=0.3, seed=5)
    q = np.array([0.001, 0.01, 0.2, 0.5, 0.9, 0.999])
    y = p.quantile(q)
    assert y.shape == (6, 4) and p.quantile(0.5).shape == (4,)
    assert np.all(np.diff(y, axis=0) > 0) and np.all(y > 0)
    for i, qi in enumerate(q):
        np.testing.assert_allclose(p.cdf(y[i]), qi, atol=1e-9)
    np.testing.assert_allclose(p.median(), y[3])
    # the density is the derivative of the CDF, in y units (Jacobian included), tails and inner bins alike
    for yy in (y[0] * 0.9, y[2], y[4], y[5] * 1.02):
        h = 1e-6 * yy
        np.testing.assert_allclose((p.cdf(yy + h) - p.cdf(yy - h)) / (2 * h), np.exp(p.logpdf(yy)), rtol=1e-3)
    s = p.sample(20000, seed=1)
    assert s.shape == (20000, 4)
    np.testing.assert_allclose((s <= y[4]).mean(0), 0.9, atol=0.015)
    np.testing.assert_array_equal(p.sample(10, seed=3), p.sample(10, seed=3))
    assert np.all(p.logpdf(np.zeros(4)) == -np.inf) and np.all(p.cdf(np.full(4, -1.0)) == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        p.quantile(1.0)


def test_mixture_of_views_is_one_distribution():
    """Several context views: cdf, quantile, density and draws of their equal mixture agree with each other."""
    rng = np.random.default_rng(3)
    borders = np.linspace(-6, 6, 33) + rng.uniform(-0.1, 0.1, 33)
    probs = rng.dirichlet(np.ones(32), size=(3, 4))  # 3 views, 4 queries
    loc, scale = np.log([2.0, 2.2, 1.9]), np.array([0.3, 0.25, 0.4])
    p = Predictive(probs, borders, loc=loc, scale=scale)
    views = [Predictive(probs[v], borders, loc=loc[v], scale=scale[v]) for v in range(3)]
    assert p.n_views == 3 and len(p) == 4
    q = np.array([0.01, 0.2, 0.5, 0.9, 0.99])
    y = p.quantile(q)
    for i, qi in enumerate(q):
        np.testing.assert_allclose(p.cdf(y[i]), qi, atol=1e-5)  # tabulated tails: exact only between borders
        np.testing.assert_allclose(p.cdf(y[i]), np.mean([v.cdf(y[i]) for v in views], axis=0), atol=1e-12)
    np.testing.assert_allclose(np.exp(p.logpdf(y[2])), np.mean([np.exp(v.logpdf(y[2])) for v in views], axis=0))
    ly = np.linspace(-8, 10, 40001)
    dens = np.exp(Predictive(np.repeat(probs[:, :1], len(ly), 1), borders, loc, scale).logpdf(np.exp(ly)) + ly)
    np.testing.assert_allclose(np.trapezoid(dens, ly), 1.0, atol=2e-3)
    np.testing.assert_allclose((p.sample(20000, seed=1) <= y[3]).mean(0), 0.9, atol=0.015)
    # one view repeated is that view
    same = Predictive(np.repeat(probs[:1], 2, 0), borders, loc=[loc[0]] * 2, scale=[scale[0]] * 2)
    np.testing.assert_allclose(same.quantile(q), views[0].quantile(q), rtol=1e-4)


def test_predictive_with_extrapolation_error_is_one_distribution():
    """With the error's shifts (a mixture over a bend of ln y): quantiles invert the mixture's CDF, and the mean,
    the moments of ln y and the draws (one shift per draw, shared by every query) are that same distribution's."""
    rng = np.random.default_rng(4)
    borders = np.linspace(-6, 6, 65) + rng.uniform(-0.05, 0.05, 65)
    probs = rng.dirichlet(np.ones(64) * 3, size=(2, 3))  # 2 views, 3 queries
    z, wz = np.polynomial.hermite_e.hermegauss(8)
    shifts = np.outer(z, [0.0, 0.05, 0.4])  # no error at the first query, a wide one at the last
    p = Predictive(probs, borders, loc=[0.5, 0.6], scale=[0.1, 0.12], spread=(shifts, wz / wz.sum()))
    q = np.array([0.01, 0.1, 0.5, 0.9, 0.99])
    y = p.quantile(q)
    assert np.all(np.diff(y, axis=0) > 0)
    for i, qi in enumerate(q):
        np.testing.assert_allclose(p.cdf(y[i]), qi, atol=2.5 * Predictive.CORE)  # read off a table between CORE levels
    ly = np.linspace(-3, 4, 7001)  # each query repeated at every ly: one call
    rep = Predictive(np.repeat(probs, len(ly), 1), borders, loc=[0.5, 0.6], scale=[0.1, 0.12],
                     spread=(np.repeat(shifts, len(ly), 1), wz / wz.sum()))
    dens = np.exp(rep.logpdf(np.exp(np.tile(ly, 3))) + np.tile(ly, 3)).reshape(3, -1)
    np.testing.assert_allclose(np.trapezoid(dens, ly, axis=1), 1.0, atol=2e-3)
    s = p.sample(100_000, seed=1)
    np.testing.assert_allclose(p.mean(), s.mean(0), rtol=3e-3)
    m, sd = p.moments_ln()
    np.testing.assert_allclose(m, np.log(s).mean(0), atol=3e-3)
    np.testing.assert_allclose(sd, np.log(s).std(0), rtol=1e-2)
    for i, qi in enumerate(q[1:4], 1):
        np.testing.assert_allclose((s <= y[i]).mean(0), qi, atol=0.005)
    # one bend per draw: the last two queries' shifts move together
    plain = Predictive(probs, borders, loc=[0.5, 0.6], scale=[0.1, 0.12]).sample(100_000, seed=1)
    assert np.corrcoef(np.log(s[:, 1]) - np.log(plain[:, 1]), np.log(s[:, 2]) - np.log(plain[:, 2]))[0, 1] > 0.99


def test_bar_quantile_bins_match_a_direct_count():
    rng = np.random.default_rng(5)
    bar = BarDistribution(np.sort(rng.normal(size=33)) * 2)
    probs = rng.dirichlet(np.ones(32) * 0.3, size=50)  # sparse rows: many empty bins
    q = rng.uniform(size=(40, 50))
    cum = bar.cumulative(probs)
    idx = np.clip((cum[None, :, 1:32] <= q[:, :, None]).sum(-1), 0, 31)
    z = bar.quantile(probs, q)
    np.testing.assert_allclose(bar.cdf(probs, z), q, atol=1e-9)
    lo, hi = bar.borders[idx], bar.borders[idx + 1]
    inner = (idx > 0) & (idx < 31)
    assert np.all((z[inner] >= lo[inner] - 1e-12) & (z[inner] <= hi[inner] + 1e-12))


def test_context_views_see_every_run():
    from bayescale.pfn.infer import context_views

    rng = np.random.default_rng(0)
    x = rng.permutation(np.geomspace(1, 1e4, 63))
    y = 1 + x ** -0.3
    one = context_views(x, y, 40, 1)
    assert len(one) == 1 and len(one[0][0]) == 40
    many = context_views(x, y, 40, 4)
    assert 1 < len(many) <= 4
    for vx, vy in many:
        assert len(vx) <= 40 and np.all(np.diff(vx) > 0) and vx[0] == x.min() and vx[-1] == x.max()
        np.testing.assert_allclose(vy, 1 + vx ** -0.3)
    assert set(np.concatenate([v[0] for v in many])) == set(x)  # together the views see every run
    short = context_views(x[:30], y[:30], 40, 4)
    assert len(short) == 1 and len(short[0][0]) == 30


# ------------------------------------------------------------------------------------------------ recalibration


def _recal():
    rng = np.random.default_rng(7)
    return Recalibration({"extrapolated": fit_map(rng.beta(2.0, 2.0, 5000)),  # raw too wide
                          "interpolated": fit_map(rng.beta(0.7, 0.7, 5000))})  # raw too narrow


def test_recalibration_map_monotone_pinned_and_validated():
    rng = np.random.default_rng(0)
    for pit in (rng.beta(2, 2, 4000), np.r_[np.full(3000, 0.5), rng.uniform(size=1000)], np.zeros(1000)):
        x, lv = fit_map(pit)
        for a in (x, lv):
            assert a[0] == 0.0 and a[-1] == 1.0 and np.all(np.diff(a) > 0)
    r = _recal()
    p = np.linspace(0, 1, 1001)
    for kind in KINDS:
        f = r.forward(kind, p)
        assert f[0] == 0 and f[-1] == 1 and np.all(np.diff(f) > 0)
        np.testing.assert_allclose(r.inverse(kind, f), p, atol=1e-12)
    assert r.forward("extrapolated", 0.25) < 0.25 < r.forward("interpolated", 0.25)  # central mass moved out / in
    good = r.to_dict()
    assert Recalibration.from_dict(json.loads(json.dumps(good))).to_dict() == good
    bad_cases = {"strictly increasing": lambda m: m["pit"].__setitem__(3, m["pit"][5]),
                 "start at 0 and end at 1": lambda m: m["level"].__setitem__(-1, 0.98),
                 "equal length": lambda m: m["pit"].pop()}
    for match, corrupt in bad_cases.items():
        d = json.loads(json.dumps(good))
        corrupt(d["maps"]["interpolated"])
        with pytest.raises(ValueError, match=match):
            Recalibration.from_dict(d)
    with pytest.raises(ValueError, match="no map"):
        Recalibration({"extrapolated": fit_map(rng.uniform(size=1000))})


def test_recalibrated_predictive_consistent():
    rng = np.random.default_rng(2)
    borders = np.linspace(-6, 6, 33) + rng.uniform(-0.1, 0.1, 33)  # no bins narrower than the integration grid
    probs = rng.dirichlet(np.ones(32), size=4)
    beyond = np.array([0.0, 0.5, 0.0, 2.0])
    p = Predictive(probs, borders, loc=np.log(2.0), scale=0.3, seed=5, beyond=beyond, recalibration=_recal())
    raw = Predictive(probs, borders, loc=np.log(2.0), scale=0.3, seed=5, beyond=beyond)
    assert p.calibrated and not raw.calibrated
    q = np.array([0.001, 0.05, 0.25, 0.5, 0.75, 0.95, 0.999])
    y = p.quantile(q)
    assert np.all(np.diff(y, axis=0) > 0)
    for i, qi in enumerate(q):  # cdf and quantile are inverses
        np.testing.assert_allclose(p.cdf(y[i]), qi, atol=1e-9)
    # cdf' = R(F) with the map of each query's kind
    for kind, rows in (("extrapolated", beyond > 0), ("interpolated", beyond == 0)):
        np.testing.assert_allclose(p.cdf(y[2])[rows], _recal().forward(kind, raw.cdf(y[2]))[rows], atol=1e-12)
    assert np.all(np.abs(p.quantile(0.75) - raw.quantile(0.75)) > 0)
    # the density integrates to 1 over y (one query's distribution repeated on a grid of ln y)
    ly = np.log(2.0) + 0.3 * np.linspace(-45, 45, 60001)
    for row in range(4):
        g = Predictive(np.repeat(probs[row:row + 1], len(ly), 0), borders, np.log(2.0), 0.3,
                       beyond=np.full(len(ly), beyond[row]), recalibration=_recal())
        dens = np.exp(g.logpdf(np.exp(ly)) + ly)  # density of ln y
        np.testing.assert_allclose(np.trapezoid(dens, ly), 1.0, atol=2e-3)
        # and it is the derivative of the calibrated CDF (away from the map's knots)
        np.testing.assert_allclose(np.gradient(g.cdf(np.exp(ly)), ly)[1000::5000], dens[1000::5000], rtol=2e-2,
                                   atol=1e-6)
    s = p.sample(20000, seed=1)
    np.testing.assert_allclose((s <= p.quantile(0.9)).mean(0), 0.9, atol=0.015)


# ------------------------------------------------------------------------------------------------ training + weights


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from bayescale.pfn.train import train

    out = tmp_path_factory.mktemp("pfn")
    # one family keeps the compiled prior small (the mixture is exercised by the prior tests above)
    kw = dict(out=out, val_every=15, n_val_batches=1, val_batch=64, border_curves=512, families=("M2",),
              progress=False, log=lambda *a: None)
    train("tiny", steps=15, calibration_curves=0, **kw)
    # pretend the first run took 1000 h: --max-minutes on resume counts the new run's time only
    ck = out / "train_state" / "pfn_tiny.ckpt.npz"
    with np.load(ck) as f:
        arrs = dict(f)
    meta = json.loads(str(arrs["meta"]))
    arrs["meta"] = np.array(json.dumps({**meta, "elapsed": 3.6e6}))
    np.savez(ck, **arrs)
    info = train("tiny", steps=45, resume=True, max_minutes=60, calibration_curves=128, **kw)
    return out, info


def test_tiny_training_lowers_loss_and_resumes(tiny):
    out, info = tiny
    assert (out / "pfn_tiny.npz").exists() and (out / "train_state" / "pfn_tiny.ckpt.npz").exists()
    hist = json.loads((out / "train_state" / "pfn_tiny.history.json").read_text())["history"]
    steps = [h[0] for h in hist]
    assert steps == [0, 15, 15, 30, 45]  # resumed at 15 (re-measured there), not restarted
    assert min(h[3] for h in hist[1:]) < hist[0][3]  # validation NLL below the untrained network's
    meta = json.loads((out / "pfn_tiny.json").read_text())
    assert meta["n_params"] > 0 and meta["config"]["n_bins"] == 64 and len(meta["sha256"]) == 64
    assert info["val_nll"] == min(h[3] for h in hist)
    rc = meta["recalibration"]  # fitted at the end of training, on prior draws from CALIB_SEED on
    assert rc["seed_range"][0] == CALIB_SEED and rc["curves"]["prefix"] == 128
    assert min(rc["targets"].values()) > 300 and load(out / "pfn_tiny.npz").recal is not None


def test_training_prior_options_saved_and_checked(tiny):
    from bayescale.pfn.train import train

    out, _ = tiny
    meta = json.loads((out / "pfn_tiny.json").read_text())
    assert meta["prior"] == {"families": ["M2"], "bump_share": 0.15, "wide_noise_share": 0.5}
    kw = dict(out=out, progress=False, log=lambda *a: None, calibration_curves=0)
    with pytest.raises(ValueError, match="another prior"):  # resuming on another prior would mix two trainings
        train("tiny", steps=60, resume=True, families=("M2",), bump_share=0.0, **kw)
    with pytest.raises(ValueError, match=r"unknown prior families \['M9'\]"):
        train("tiny", steps=1, families=("M2", "M9"), **kw)
    with pytest.raises(ValueError, match="must be in"):
        train("tiny", steps=1, families=("M2",), wide_noise_share=1.5, **kw)


def test_calibrated_false_is_the_raw_network(tiny):
    w = tiny[0] / "pfn_tiny.npz"
    x = np.geomspace(1e6, 1e8, 9)
    y = 2.0 + 5.0 * (x / 1e6) ** -0.3
    xq = np.r_[3e6, 3e7, 1e9, 1e10]  # two inside the runs' range, two beyond
    cal, raw = predictive(x, y, xq, weights=w, error="raw"), predictive(x, y, xq, weights=w, calibrated=False,
                                                                        error="raw")
    assert cal.calibrated and not raw.calibrated
    np.testing.assert_allclose(cal.beyond, [0, 0, 1, 2], atol=1e-12)
    plain = Predictive(raw.probs, raw.borders, raw.loc, raw.scale)  # no map at all
    q = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    np.testing.assert_array_equal(raw.quantile(q), plain.quantile(q))
    np.testing.assert_array_equal(raw.logpdf(raw.median()), plain.logpdf(raw.median()))
    np.testing.assert_array_equal(raw.sample(5, seed=1), plain.sample(5, seed=1))
    assert not np.allclose(cal.quantile(q), raw.quantile(q))
    rec = load(w).recal
    for kind, rows in (("interpolated", slice(0, 2)), ("extrapolated", slice(2, 4))):
        yq = raw.quantile(0.3)
        np.testing.assert_allclose(cal.cdf(yq)[rows], rec.forward(kind, raw.cdf(yq))[rows], atol=1e-12)
    b_cal = predict(pd.DataFrame({"x": x, "y": y}), at=xq, levels=(0.5,), weights=w, error="raw")
    b_raw = predict(pd.DataFrame({"x": x, "y": y}), at=xq, levels=(0.5,), weights=w, calibrated=False, error="raw")
    np.testing.assert_allclose(b_raw.interval(0.5)[1], raw.quantile(0.75))
    np.testing.assert_allclose(b_cal.interval(0.5)[1], cal.quantile(0.75))
    assert "raw network" in b_raw.attrs["pfn_weights"] and "recalibrated" in b_cal.attrs["pfn_weights"]


def test_corrupt_recalibration_entry(tiny, tmp_path):
    for name in ("pfn_tiny.npz", "pfn_tiny.json"):
        shutil.copy(tiny[0] / name, tmp_path / name)
    good = json.loads((tmp_path / "pfn_tiny.json").read_text())
    for corrupt in (lambda m: m["pit"].reverse(), lambda m: m["level"].__setitem__(0, 0.1),
                    lambda m: m.pop("level")):
        info = json.loads(json.dumps(good))
        corrupt(info["recalibration"]["maps"]["extrapolated"])
        (tmp_path / "pfn_tiny.json").write_text(json.dumps(info))
        with pytest.raises(PFNWeightsError, match="'recalibration' entry is malformed.*bayescale pfn calibrate"):
            load(tmp_path / "pfn_tiny.npz")
    del good["recalibration"]  # weights without a map give the raw network
    (tmp_path / "pfn_tiny.json").write_text(json.dumps(good))
    assert not predictive([1.0, 2.0, 4.0], [3.0, 2.0, 1.5], [8.0], weights=tmp_path / "pfn_tiny.npz").calibrated


def test_predictive_api(tiny):
    w = tiny[0] / "pfn_tiny.npz"
    assert bs.pfn.available(w)
    x = np.geomspace(1e6, 1e8, 9)
    y = 2.0 + 5.0 * (x / 1e6) ** -0.3
    p = predictive(x, y, [1e9, 1e10, 1e11], weights=w, error="raw")  # the network alone
    assert p.quantile(0.5).shape == (3,) and p.quantile([0.1, 0.9]).shape == (2, 3)
    assert p.logpdf(p.median()).shape == (3,) and np.all(np.isfinite(p.logpdf(p.median())))
    assert p.sample(7, seed=0).shape == (7, 3)
    many = predictive_many([(x, y, [1e9, 1e10, 1e11]), (x[:5], y[:5] * 2, np.geomspace(1e3, 1e12, 300))], weights=w,
                           error="raw")
    assert len(many) == 2 and len(many[1]) == 300  # more than QUERY_CHUNK queries: several rows
    last = predictive(x[:5], y[:5] * 2, np.geomspace(1e3, 1e12, 300)[-1:], weights=w, error="raw")
    np.testing.assert_allclose(many[1].quantile(0.5)[-1:], last.quantile(0.5), rtol=1e-5)
    np.testing.assert_allclose(many[0].quantile([0.1, 0.5, 0.9]), p.quantile([0.1, 0.5, 0.9]), rtol=1e-5)
    # queries do not attend to each other: asking about one point alone gives the same answer
    alone = predictive(x, y, [1e10], weights=w, error="raw")
    np.testing.assert_allclose(alone.quantile(0.5), p.quantile(0.5)[1], rtol=1e-5)
    # a context longer than the network reads: several thinnings, mixed; one view is the first thinning alone
    from bayescale.pfn.infer import context_views, max_context

    xl = np.geomspace(1e6, 1e8, 3 * max_context(bs.pfn.load(w).cfg))
    yl = 2.0 + 5.0 * (xl / 1e6) ** -0.3
    mixed = predictive_many([(xl, yl, [1e9, 1e10])], weights=w, views=4)[0]
    first = predictive_many([(xl, yl, [1e9, 1e10])], weights=w, views=1, error="raw")[0]
    assert mixed.n_views == 4 and first.n_views == 1
    thin = context_views(xl, yl, max_context(bs.pfn.load(w).cfg), 1)[0]
    alone = predictive(*thin, [1e9, 1e10], weights=w, error="raw")
    np.testing.assert_allclose(first.quantile(0.5), alone.quantile(0.5), rtol=1e-9)
    assert np.all(np.isfinite(mixed.quantile([0.05, 0.5, 0.95]))) and np.all(mixed.median() != first.median())
    # the default carries the extrapolation error of real curves: wider beyond the context, the same inside
    xq = [3e6, 1e9, 1e11]
    default, raw = predictive(x, y, xq, weights=w), predictive(x, y, xq, weights=w, error="raw")
    assert default.spread is not None and raw.spread is None and "tau" in default.error_note
    w_def, w_raw = (np.diff(p.quantile([0.25, 0.75]), axis=0)[0] for p in (default, raw))
    assert np.isclose(w_def[0], w_raw[0], rtol=1e-2) and np.all(w_def[1:] > w_raw[1:])
    assert "tau" in predict(pd.DataFrame({"x": x, "y": y}), at=xq, weights=w).attrs["extrapolation_error"]
    with pytest.raises(SettingError, match="error must be"):
        predictive(x, y, xq, weights=w, error="huge")


@pytest.mark.parametrize("bad, match", [
    ((np.array([1.0, 2.0, np.nan, 4.0]), np.ones(4)), "NaN"),
    ((np.array([1.0, 2.0, -3.0, 4.0]), np.ones(4)), "must be > 0"),
    ((np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 0.0, 1.0, 1.0])), "must be > 0"),
    ((np.array([1.0, 1.0, 2.0]), np.ones(3)), "at least 3 distinct"),
])
def test_predictive_bad_input(tiny, bad, match):
    with pytest.raises(RunTableError, match=match):
        predictive(bad[0], bad[1], [10.0], weights=tiny[0] / "pfn_tiny.npz")


def test_missing_and_corrupt_weights(tiny, tmp_path):
    src = tiny[0]
    with pytest.raises(PFNWeightsError, match="not found.*bayescale pfn train"):
        load(tmp_path / "nope.npz")
    assert not bs.pfn.available(tmp_path / "nope.npz")
    for name in ("pfn_tiny.npz", "pfn_tiny.json"):
        shutil.copy(src / name, tmp_path / name)
    raw = bytearray((tmp_path / "pfn_tiny.npz").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "pfn_tiny.npz").write_bytes(bytes(raw))
    with pytest.raises(PFNWeightsError, match="corrupt: sha256.*bayescale pfn train"):
        load(tmp_path / "pfn_tiny.npz")
    assert not bs.pfn.available(tmp_path / "pfn_tiny.npz")
    (tmp_path / "pfn_tiny.json").write_text("{not json")
    with pytest.raises(PFNWeightsError, match="unreadable"):
        load(tmp_path / "pfn_tiny.npz")


def test_weights_save_read_and_checks(tmp_path):
    """weights.py on its own: save/read round trip, hash check, config/shape checks, path resolution."""
    cfg = CONFIGS["tiny"]
    model = PFN(cfg, jax.random.PRNGKey(3))
    borders = np.linspace(-5, 5, cfg.n_bins + 1)
    info = save_weights(model, cfg, borders, tmp_path / "w.npz", {"step": 7, "families": ["M2"]})
    assert info["sha256"] == sha256(tmp_path / "w.npz") and info["step"] == 7
    w = read_weights(tmp_path / "w.json")  # the JSON's path names the same weights
    assert w.cfg == cfg and w.recal is None and w.path == tmp_path / "w.npz" and w.info["families"] == ["M2"]
    np.testing.assert_array_equal(w.borders, borders)
    for a, b in zip(tree_arrays(w.model), tree_arrays(model)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="expected"):
        replace_arrays(model, tree_arrays(model)[:-1])
    assert weights_path() == weights_path("pfn_small") and weights_path().name == "pfn_small.npz"
    # a config that does not fit the arrays (the hash still matches)
    meta = json.loads((tmp_path / "w.json").read_text())
    (tmp_path / "w.json").write_text(json.dumps({**meta, "config": {**meta["config"], "d_model": 16}}))
    with pytest.raises(PFNWeightsError, match="do not match their config"):
        read_weights(tmp_path / "w.npz")
    (tmp_path / "w.json").write_text(json.dumps({**meta, "format": "other/9"}))
    with pytest.raises(PFNWeightsError, match="format"):
        read_weights(tmp_path / "w.npz")


def test_weights_of_one_shape_share_one_compiled_forward_pass(tmp_path):
    """Two sets of weights of the same configuration run in one compiled forward pass (the weights are its inputs):
    predicting with the second traces nothing, and gives its own answer."""
    cfg = CONFIGS["tiny"]
    borders = np.linspace(-5, 5, cfg.n_bins + 1)
    for i in (1, 2):
        save_weights(PFN(cfg, jax.random.PRNGKey(10 + i)), cfg, borders, tmp_path / f"w{i}.npz", {"step": i})
    x = np.geomspace(1e6, 1e8, 10)
    y = 0.3 * x**-0.1
    kw = dict(calibrated=False, error="raw", views=1)
    first = predictive(x, y, [2e8, 5e8], weights=tmp_path / "w1.npz", **kw)
    with traces() as traced:
        second = predictive(x, y, [2e8, 5e8], weights=tmp_path / "w2.npz", **kw)
    assert not traced and not np.allclose(first.median(), second.median())


def test_weights_not_an_archive_with_matching_hash(tmp_path, capsys):
    """A weights file that is not an .npz of weights, its JSON's sha256 updated to match: a PFNWeightsError naming the
    file and the fix (not a raw BadZipFile/EOFError/...), and through the CLI one line on stderr, exit 2."""
    from bayescale.cli import main

    cfg = CONFIGS["tiny"]
    save_weights(PFN(cfg, jax.random.PRNGKey(3)), cfg, np.linspace(-5, 5, cfg.n_bins + 1), tmp_path / "w.npz", {})
    good, meta = (tmp_path / "w.npz").read_bytes(), json.loads((tmp_path / "w.json").read_text())
    no_borders = tmp_path / "nb.npz"
    np.savez(no_borders, p000=np.zeros(3))
    for content in (b"not weights\n", b"", good[: len(good) // 2], b"PK\x03\x04garbage", no_borders.read_bytes()):
        (tmp_path / "w.npz").write_bytes(content)
        (tmp_path / "w.json").write_text(json.dumps({**meta, "sha256": sha256(tmp_path / "w.npz")}))
        with pytest.raises(PFNWeightsError, match=r"w\.npz are not a readable weights archive.*bayescale pfn train"):
            read_weights(tmp_path / "w.npz")
    runs = tmp_path / "runs.csv"
    _runs().query("curve == 'a'").to_csv(runs, index=False)
    assert main(["predict", "--method", "pfn", str(runs), "--x", "n", "--y", "loss", "--at", "n=1e9",
                 "--weights", str(tmp_path / "w.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: PFN weights") and "not a readable weights archive" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bundled_weights_tampered_hash_fires(tmp_path):
    if not bs.pfn.available():
        pytest.skip("no bundled PFN weights in this checkout")
    src = weights_path()
    for p in (src, src.with_suffix(".json")):
        shutil.copy(p, tmp_path / p.name)
    assert read_weights(tmp_path / src.name).info["sha256"] == sha256(src)
    raw = bytearray((tmp_path / src.name).read_bytes())
    raw[-100] ^= 0x01
    (tmp_path / src.name).write_bytes(bytes(raw))
    with pytest.raises(PFNWeightsError, match="corrupt: sha256"):
        read_weights(tmp_path / src.name)


def test_inference_imports_no_training_code():
    """infer (and the package's public API) loads without the training and calibration-fitting modules."""
    code = ("import sys, bayescale.pfn.infer, bayescale.pfn as p; p.Recalibration, p.BarDistribution, "
            "p.PFNWeightsError; bad = [m for m in ('bayescale.pfn.train', 'bayescale.pfn.calibrate') "
            "if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})


def _runs():
    x = np.geomspace(1e6, 1e8, 8)
    return pd.DataFrame({"n": np.r_[x, x], "loss": np.r_[2 + 5 * (x / 1e6) ** -0.3, 1 + 3 * (x / 1e6) ** -0.2],
                         "curve": ["a"] * 8 + ["b"] * 8})


def test_predict_returns_bands(tiny):
    w = tiny[0] / "pfn_tiny.npz"
    runs = _runs()
    b = predict(runs[runs.curve == "a"], x="n", y="loss", at=[3e7, 1e9, 1e10], levels=(0.5, 0.9), weights=w)
    assert isinstance(b, bs.Bands) and b.attrs["method"] == "pfn" and "curve_note" in b.attrs
    assert b.levels == [0.5, 0.9] and b.inputs == ["x"]
    lo50, hi50 = b.interval(0.5)
    lo90, hi90 = b.interval(0.9)
    med = b["run_median"].values
    assert np.all(lo90 <= lo50) and np.all(lo50 <= med) and np.all(med <= hi50) and np.all(hi50 <= hi90)
    np.testing.assert_allclose(b["beyond"].values, [0.0, 1.0, 2.0], atol=1e-9)
    assert list(b["extrapolation"].values) == [False, True, True]
    t = b.table()
    assert {"median", "lo50", "hi90", "beyond"} <= set(t.columns)
    grouped = predict(runs, x="n", y="loss", at="n=1e9;1e10", group="curve", weights=w)
    assert set(grouped) == {"a", "b"} and all(isinstance(v, bs.Bands) for v in grouped.values())
    # what the PFN cannot see is said: two curves read as one, and queries below the smallest run
    with pytest.warns(UserWarning, match="several curves in one table"):
        predict(runs, x="n", y="loss", at=[1e9], weights=w)
    with pytest.warns(UserWarning, match="below the smallest run"):
        predict(runs[runs.curve == "a"], x="n", y="loss", at=[1e3, 1e9], weights=w)
    # several model sizes whose x never repeat (the Chinchilla runs by tokens): named by their size column
    sizes = bs.datasets.chinchilla()
    with pytest.warns(UserWarning, match="column 'N' takes .* values: several model sizes"):
        predict(sizes, x="D", y="loss", at=[1e12], weights=w)
    with pytest.raises(RunTableError, match="at least 3 distinct"):
        predict(runs.iloc[:2], x="n", y="loss", at=[1e9], weights=w)
    with pytest.raises(RunTableError, match="not in the run table"):
        predict(runs, x="params", y="loss", at=[1e9], weights=w)
    bad = runs.copy()
    bad.loc[3, "n"] = -1.0
    with pytest.raises(RunTableError, match="must be > 0"):
        predict(bad, x="n", y="loss", at=[1e9], group="curve", weights=w)


def test_cli_predict_pfn(tiny, tmp_path, capsys):
    from bayescale.cli import main

    path = tmp_path / "runs.csv"
    _runs().to_csv(path, index=False)
    w = str(tiny[0] / "pfn_tiny.npz")
    assert main(["predict", "--method", "pfn", str(path), "--x", "n", "--y", "loss", "--group", "curve",
                 "--at", "n=1e9;1e10", "--weights", w, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"a", "b"} and len(out["a"]["points"]) == 2
    assert "tau" in out["a"]["attrs"]["extrapolation_error"]
    # --raw: the network alone (no recalibration, no extrapolation error)
    assert main(["predict", "--method", "pfn", str(path), "--x", "n", "--y", "loss", "--group", "curve",
                 "--at", "n=1e9;1e10", "--weights", w, "--json", "--raw"]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert raw["a"]["attrs"]["extrapolation_error"] == "none (raw)"
    assert main(["predict", "--method", "pfn", str(path), "--x", "n", "--y", "loss", "--at", "n=1e9",
                 "--weights", str(tmp_path / "missing.npz")]) == 2
    assert "PFN weights not found" in capsys.readouterr().err


def test_bundled_weights():
    """The shipped weights load, match their metadata and predict a real curve."""
    if not bs.pfn.available():
        pytest.skip("no bundled PFN weights in this checkout")
    L = load()
    assert L.info["n_params"] == sum(int(np.size(a)) for a in jax.tree_util.tree_leaves(
        __import__("equinox").filter(L.model, __import__("equinox").is_array)))
    assert L.info["n_params"] < 26.8e6 / 5  # at most a fifth of NSL-PFN's parameters
    rev = bs.datasets.revisiting()
    cur = rev[rev.curve == rev.curve.iloc[0]]
    b = predict(cur[cur.train], at=cur[~cur.train].x.to_numpy()[:5])
    assert np.all(np.isfinite(b["run_median"].values)) and np.all(b["run_median"].values > 0)
    rc = L.info["recalibration"]
    assert L.recal is not None and min(rc["targets"].values()) > 5000
    assert rc["seed_range"][0] >= CALIB_SEED and rc["seed_range"][1] < 40_000_000


def test_bundled_recalibration_coverage():
    """On fresh prior draws (seed 40_000_000, disjoint from the map's), the recalibrated 50% interval is within 2.5
    points of nominal and closer to it than the raw network's (2-4 points too wide: benchmarks/pfn.py); 90% stays
    near nominal (200 curves are too few to resolve the 90% interval more finely)."""
    if not bs.pfn.available():
        pytest.skip("no bundled PFN weights in this checkout")
    d = {k: np.asarray(v) for k, v in sample_prior(40_000_000, 200, 48, split="prefix").items()}
    items = [(np.exp(d["t"][i][c]), d["y"][i][c], np.exp(d["t"][i][t]), d["y"][i][t])
             for i, (c, t) in enumerate(zip(d["ctx"], d["target"])) if t.any()]
    cov = {}
    for cal in (True, False):
        inside = []
        for p, (*_, yq) in zip(predictive_many([it[:3] for it in items], calibrated=cal, error="raw"), items):
            q = p.quantile(np.array([0.25, 0.75, 0.05, 0.95]))
            inside.append(np.stack([(yq >= q[0]) & (yq <= q[1]), (yq >= q[2]) & (yq <= q[3])]))
        cov[cal] = np.concatenate(inside, axis=1).mean(1)
    assert sum(len(it[3]) for it in items) > 2000
    assert abs(cov[True][0] - 0.5) <= 0.025 and abs(cov[True][1] - 0.9) <= 0.035
    assert abs(cov[True][0] - 0.5) < abs(cov[False][0] - 0.5)


def test_cli_pfn_train_arguments():
    from bayescale.cli import cmd_pfn_train, parser

    a = parser().parse_args(["pfn", "train", "--config", "tiny", "--steps", "3", "--max-minutes", "1.5", "--out", "o",
                             "--resume"])
    assert (a.config, a.steps, a.max_minutes, a.out, a.resume, a.func) == ("tiny", 3, 1.5, "o", True, cmd_pfn_train)
    with pytest.raises(SystemExit):
        parser().parse_args(["pfn", "train", "--config", "huge"])
    from bayescale.cli import cmd_pfn_calibrate

    a = parser().parse_args(["pfn", "calibrate", "--weights", "w.npz", "--curves", "64"])
    assert (a.weights, a.curves, a.seed, a.func) == ("w.npz", 64, None, cmd_pfn_calibrate)
    assert parser().parse_args(["pfn", "train", "--calibration-curves", "0"]).calibration_curves == 0


def test_cli_pfn_train_prior_options(monkeypatch):
    import bayescale.pfn.train as tr
    from bayescale.cli import parser

    seen = {}
    monkeypatch.setattr(tr, "train", lambda *a, **kw: seen.update(kw))
    a = parser().parse_args(["pfn", "train", "--families", "M2, M3", "--bump-share", "0", "--wide-noise-share", "0.25"])
    a.func(a)
    assert (seen["families"], seen["bump_share"], seen["wide_noise_share"]) == (["M2", "M3"], 0.0, 0.25)
    seen.clear()
    a = parser().parse_args(["pfn", "train"])
    a.func(a)  # defaults: the whole prior, the train() defaults for the shares
    assert seen["families"] is None and "bump_share" not in seen and "wide_noise_share" not in seen


def test_bundled_error_model_covers_curves_that_bend_as_it_says():
    """Simulated check of the default PFN bands: prior curves that bend as the shipped error model says (one tau per
    curve from its prior; the context's runs above its own cut bent by ``kappa tau b^gamma z_own``, the held-out
    runs beyond the context by ``tau b^gamma z``) are covered at nominal rates by the default predictive (its tau
    updated with those own runs), and not by the raw one."""
    from bayescale.pfn.error import OWN_CUT, curve_error, default_error_model

    if not bs.pfn.available() or default_error_model() is None:
        pytest.skip("no bundled PFN weights or error model in this checkout")
    model = default_error_model()
    rng = np.random.default_rng(1)
    d = {k: np.asarray(v) for k, v in sample_prior(40_000_001, 300, 48, split="prefix").items()}
    items = []
    for i, (c, t) in enumerate(zip(d["ctx"], d["target"])):
        if not t.any():
            continue
        xc, yc, xq = np.exp(d["t"][i][c]), d["y"][i][c].copy(), np.exp(d["t"][i][t])
        tau = curve_error(model, xc, yc).quantile(rng.uniform())
        lx = np.log(xc)
        later = lx > np.quantile(lx, OWN_CUT)
        if later.any() and (~later).any():
            b_own = np.log10(xc[later] / xc[~later].max())
            yc[later] *= np.exp(model.kappa * tau * b_own**model.gamma * rng.standard_normal())
        b = np.maximum(np.log10(xq / xc.max()), 0.0)
        items.append((xc, yc, xq, d["y"][i][t] * np.exp(tau * b**model.gamma * rng.standard_normal())))
    cov = {}
    for error in ("default", "raw"):
        inside = []
        for p, (*_, yq) in zip(predictive_many([it[:3] for it in items], error=error), items):
            q = p.quantile(np.array([0.25, 0.75, 0.05, 0.95]))
            inside.append(np.stack([(yq >= q[0]) & (yq <= q[1]), (yq >= q[2]) & (yq <= q[3])]))
        cov[error] = np.concatenate(inside, axis=1).mean(1)
    assert abs(cov["default"][0] - 0.5) <= 0.05 and abs(cov["default"][1] - 0.9) <= 0.04
    # the bend is not noise the raw network expects: its bands are too narrow
    assert cov["raw"][1] < 0.88 and abs(cov["raw"][1] - 0.9) > abs(cov["default"][1] - 0.9)


def test_split_context_and_own_errors():
    """A context is cut at its OWN_CUT quantile of ln x (at least MIN_CONTEXT distinct x below, later runs thinned);
    a curve whose later runs turn away from its earlier trend gets a larger tau and wider bands than the same curve
    without the turn, and the predictive says which runs informed its error."""
    from bayescale.pfn import own_errors_many
    from bayescale.pfn.error import OWN_CUT, split_context

    x = np.geomspace(1e6, 1e9, 40)
    early, later = split_context(x, 2 + (x / 1e6) ** -0.3, max_later=5)
    assert np.all(x[early] <= np.quantile(x, OWN_CUT)) and np.all(x[later] > np.quantile(x, OWN_CUT))
    assert len(later) == 5 and x[later].max() == x.max() and len(early) == 28
    assert [len(v) for v in split_context(x[:4], x[:4])] == [3, 1]
    assert split_context(x[:3], x[:3]) is None  # 2 below the cut: too few to predict from
    smooth = 2 + (x / 1e6) ** -0.3
    turned = smooth * np.where(x > 1e8, (x / 1e8) ** 0.05, 1.0)  # bends upwards in its last decade
    own = own_errors_many([(x, smooth), (x, turned), (x[:3], smooth[:3])])
    assert len(own[2]) == 0 and np.abs(own[1]["r"]).mean() > 3 * np.abs(own[0]["r"]).mean()
    xq = np.array([1e10, 1e11])
    p_s, p_t = predictive_many([(x, smooth, xq), (x, turned, xq)])
    p_prior = predictive_many([(x, turned, xq)], own_errors=False)[0]
    width = lambda p: np.diff(np.log(p.quantile(np.array([0.05, 0.95]))), axis=0)[0]  # noqa: E731
    assert np.all(width(p_t) > width(p_s)) and np.all(width(p_t) > width(p_prior))
    assert "of its own runs" in p_t.error_note and "prior only" in p_prior.error_note


def test_error_spread_quadrature():
    from bayescale.error_model import ExtrapolationError
    from bayescale.pfn.error import N_TAU, N_Z, context_noise, spread

    b = np.array([0.0, 0.5, 2.0])
    sh, w = spread(ExtrapolationError.fixed(0.1, gamma=1.0), b)
    assert sh.shape == (N_Z, 3) and np.isclose(w.sum(), 1) and np.all(sh[:, 0] == 0)
    np.testing.assert_allclose(np.sqrt(w @ sh**2), 0.1 * b, rtol=1e-9)  # the sd of the bend: tau b^gamma
    grid = np.linspace(np.log(1e-3), np.log(1.0), 50)
    err = ExtrapolationError(tuple(grid), tuple(np.ones(50) / 50), 0.5, "test")
    sh, w = spread(err, b)
    assert sh.shape == (N_TAU * N_Z, 3)
    assert np.sqrt(w @ sh[:, 2] ** 2) > np.sqrt(w @ sh[:, 1] ** 2) > 0  # grows with the distance
    # noise from second differences: a smooth curve has none, white noise of sd 0.02 about 0.02
    x = np.geomspace(1, 1e3, 400)
    assert context_noise(2 + x**-0.3) < 1e-3
    noisy = (2 + x**-0.3) * np.exp(0.02 * np.random.default_rng(0).standard_normal(400))
    assert 0.015 < context_noise(noisy) < 0.025
