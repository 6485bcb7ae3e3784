"""The PFN extrapolator: prior sampler, bar distribution, training, weights loading, predict -> Bands, CLI.

Training here uses the ``tiny`` config for a few dozen steps (behaviour, not quality); the quality of the shipped
weights is measured by ``benchmarks/pfn.py``.
"""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.errors import RunTableError
from bayescale.pfn.infer import PFNWeightsError, Predictive, load, predict, predictive, predictive_many
from bayescale.pfn.network import bar_logpdf
from bayescale.pfn.prior import FAMILIES, MIN_CONTEXT, normalize, sample_prior


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


def test_prior_splits_and_families():
    d = {k: np.asarray(v) for k, v in sample_prior(3, 64, 32, split="prefix").items()}
    for i in range(64):  # prefix: every target lies beyond every context point
        if d["target"][i].any():
            assert d["t"][i][d["ctx"][i]].max() <= d["t"][i][d["target"][i]].min()
    r = {k: np.asarray(v) for k, v in sample_prior(3, 64, 32, split="random").items()}
    interleaved = [r["target"][i].any() and r["t"][i][r["target"][i]].min() < r["t"][i][r["ctx"][i]].max()
                   for i in range(64)]
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
    borders = jnp.asarray(np.sort(np.random.default_rng(0).normal(size=33)) * 2)
    logits = jnp.asarray(np.random.default_rng(1).normal(size=(3, 32)))
    grid = jnp.linspace(-40, 40, 400001)
    dens = jnp.exp(jax.vmap(lambda g: bar_logpdf(logits, borders, jnp.full((3,), g)))(grid))
    mass = np.asarray(jnp.trapezoid(dens, grid, axis=0))
    np.testing.assert_allclose(mass, 1.0, atol=2e-3)


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


# ------------------------------------------------------------------------------------------------ training + weights


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from bayescale.pfn.train import train

    out = tmp_path_factory.mktemp("pfn")
    # one family keeps the compiled prior small (the mixture is exercised by the prior tests above)
    kw = dict(out=out, val_every=15, n_val_batches=1, val_batch=64, border_curves=512, families=("M2",),
              progress=False, log=lambda *a: None)
    train("tiny", steps=15, **kw)
    info = train("tiny", steps=45, resume=True, **kw)
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


def test_predictive_api(tiny):
    w = tiny[0] / "pfn_tiny.npz"
    assert bs.pfn.available(w)
    x = np.geomspace(1e6, 1e8, 9)
    y = 2.0 + 5.0 * (x / 1e6) ** -0.3
    p = predictive(x, y, [1e9, 1e10, 1e11], weights=w)
    assert p.quantile(0.5).shape == (3,) and p.quantile([0.1, 0.9]).shape == (2, 3)
    assert p.logpdf(p.median()).shape == (3,) and np.all(np.isfinite(p.logpdf(p.median())))
    assert p.sample(7, seed=0).shape == (7, 3)
    many = predictive_many([(x, y, [1e9, 1e10, 1e11]), (x[:5], y[:5] * 2, np.geomspace(1e3, 1e12, 150))], weights=w)
    assert len(many) == 2 and len(many[1]) == 150  # >QUERY_CHUNK queries are chunked
    np.testing.assert_allclose(many[0].quantile([0.1, 0.5, 0.9]), p.quantile([0.1, 0.5, 0.9]), rtol=1e-5)
    # queries do not attend to each other: asking about one point alone gives the same answer
    alone = predictive(x, y, [1e10], weights=w)
    np.testing.assert_allclose(alone.quantile(0.5), p.quantile(0.5)[1], rtol=1e-5)


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


def test_cli_pfn_train_arguments():
    from bayescale.cli import cmd_pfn_train, parser

    a = parser().parse_args(["pfn", "train", "--config", "tiny", "--steps", "3", "--max-minutes", "1.5", "--out", "o",
                             "--resume"])
    assert (a.config, a.steps, a.max_minutes, a.out, a.resume, a.func) == ("tiny", 3, 1.5, "o", True, cmd_pfn_train)
    with pytest.raises(SystemExit):
        parser().parse_args(["pfn", "train", "--config", "huge"])
