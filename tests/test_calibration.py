"""Extrapolation discrepancy: tau estimation, calibrated coverage on simulated errors, and its effect on bands."""

import numpy as np
import pandas as pd
import pytest
from conftest import FAST, chinchilla_truth

import bayescale as bs
from bayescale.calibration import estimate_tau
from bayescale.error_model import default_error_model
from bayescale.runs import fitted_span


def _simulate(tau, n, seed):
    rng = np.random.default_rng(seed)
    b = rng.uniform(0.2, 2.0, n)  # decades beyond the data
    s = rng.uniform(0.005, 0.03, n)  # the fit's own predictive sd of ln y
    r = rng.normal(0, np.sqrt(s**2 + (tau * b) ** 2))
    return r, s, b


@pytest.mark.parametrize("tau", [0.02, 0.1])
def test_estimate_tau_recovers_and_calibrates(tau):
    r, s, b = _simulate(tau, 400, seed=1)
    est = estimate_tau(r, s, b)
    assert abs(est - tau) < 0.2 * tau
    # nominal 90% intervals of new errors, with the estimated tau, cover close to 90%
    r2, s2, b2 = _simulate(tau, 4000, seed=2)
    z = np.abs(r2) / np.sqrt(s2**2 + (est * b2) ** 2)
    cover = float(np.mean(z <= 1.6448536269514722))
    assert 0.87 <= cover <= 0.93
    # without the discrepancy the same intervals are far too narrow
    assert np.mean(np.abs(r2) / s2 <= 1.6448536269514722) < cover - 0.2


def test_estimate_tau_is_zero_when_the_errors_need_none():
    rng = np.random.default_rng(3)
    s = np.full(200, 0.02)
    r = rng.normal(0, 0.01, 200)  # smaller than the fit's own spread
    assert estimate_tau(r, s, np.ones(200)) == 0.0
    assert estimate_tau(r, s, np.zeros(200)) == 0.0  # nothing beyond the data: no information


def test_discrepancy_widens_bands_beyond_the_data_only(chinchilla_fit):
    at = {"N": [1e8, 1e11], "D": [1e10, 1e13]}  # inside, then 2 decades beyond
    raw = chinchilla_fit.predict(at, levels=(0.9,), seed=0, raw=True)
    wide = chinchilla_fit.with_discrepancy(0.1).predict(at, levels=(0.9,), seed=0)
    w_raw = np.subtract(*raw.interval(0.9)[::-1])
    w_wide = np.subtract(*wide.interval(0.9)[::-1])
    assert w_wide[0] == pytest.approx(w_raw[0], rel=1e-12)
    assert w_wide[1] > 1.5 * w_raw[1]
    assert wide.attrs["discrepancy_tau"] == 0.1 and raw.attrs["extrapolation_error"] == "none (raw posterior)"
    assert chinchilla_fit.error.method.startswith("corpus prior")  # with_discrepancy left the fit as it was


def test_calibrate_holds_out_the_largest_runs(chinchilla_fit, tmp_path):
    cal_fit = chinchilla_fit.calibrate(holdout=0.2, **FAST)
    cal = cal_fit.calibration
    runs = chinchilla_fit.runs
    assert len(cal.heldout) == round(0.2 * len(runs))
    size = np.log(runs.N) + np.log(runs.D)
    assert (np.log(cal.heldout.N) + np.log(cal.heldout.D)).min() >= np.sort(size)[-len(cal.heldout)] - 1e-9
    assert (cal.heldout.beyond >= 0).all() and np.isfinite(cal.tau) and cal.tau >= 0
    assert cal_fit.discrepancy == cal.tau
    # the simulated runs follow the law exactly, so the held-out errors are small against the truth's scale
    truth = chinchilla_truth(cal.heldout.N.to_numpy(), cal.heldout.D.to_numpy())
    assert np.allclose(cal.heldout.y, truth, rtol=0.05)
    back = bs.load_fit(cal_fit.with_discrepancy(0.05).save(tmp_path / "f.nc"))
    assert back.discrepancy == 0.05


def test_bad_holdout_and_tau(chinchilla_fit):
    with pytest.raises(ValueError, match="holdout"):
        chinchilla_fit.calibrate(holdout=1.5)
    with pytest.raises(ValueError, match="toward"):
        chinchilla_fit.calibrate(toward="up")
    with pytest.raises(ValueError, match="tau"):
        chinchilla_fit.with_discrepancy(-1.0)



@pytest.mark.parametrize("n_runs, law, method", [(5, "M3", "holdout"), (6, "M4", "simpler law"),
                                                 (7, "M4", "prequential")])
def test_short_ladders_are_never_refused(n_runs, law, method):
    """Pilot ladders of 5-7 runs (M4 needs 6 points, M3 4): leave-future-out falls back to one-step-ahead refits,
    of a simpler law when the law cannot be refitted without a run, and says which it used."""
    x = np.geomspace(1e6, 1e9, n_runs)
    y = 0.3 + 2.0 * x**-0.15 * np.exp(np.random.default_rng(n_runs).normal(0, 0.01, n_runs))
    f = bs.fit(pd.DataFrame({"x": x, "y": y}), law, x="x", y="y", seed=0, **FAST)
    cal = f.calibrate(seed=1)
    assert cal.calibration.method.startswith(method)
    assert len(cal.calibration.heldout) >= 1 and np.isfinite(cal.discrepancy)
    assert (cal.calibration.heldout["beyond"] > 0).all()


def test_no_run_to_hold_out_warns_and_keeps_tau_zero():
    """Five runs of the sigmoid law (5 points needed, no simpler law in C): nothing to hold out, said so."""
    c = np.geomspace(1e18, 1e24, 5)
    y = 0.25 + 0.6 / (1 + np.exp(-0.8 * (np.log(c) - np.log(1e21))))
    f = bs.fit(pd.DataFrame({"C": c, "acc": y}), "sigmoid", x="C", y="acc", seed=0, **FAST)
    with pytest.warns(UserWarning, match="no run of the 5 can be held out"):
        cal = f.calibrate()
    assert cal.discrepancy == 0.0 and cal.calibration.method == "none"


def test_fit_many_pooled_calibration_sets_one_tau():
    rng = np.random.default_rng(5)
    x = np.geomspace(1e3, 1e6, 10)
    rows = [{"curve": c, "x": xi, "y": 2.0 * xi**-0.3 * (1 + 0.05 * c) * np.exp(rng.normal(0, 0.01))}
            for c in range(2) for xi in x]
    import pandas as pd

    fm = bs.fit_many(pd.DataFrame(rows), "M1", group="curve", x="x", y="y", refit_flagged=False, **FAST)
    cal = fm.calibrate(holdout=0.3, **FAST)
    taus = {f.discrepancy for f in cal.values()}
    assert len(taus) == 1 and next(iter(taus)) >= 0
    assert set(next(iter(cal.values())).calibration.heldout["group"]) == {0, 1}
    assert all(f.error.method.startswith("corpus prior") for f in fm.values())  # the fits themselves unchanged


def test_localize_counts_far_runs_less(tmp_path):
    """Runs more than a decade from the target bend away from the law (0.1 per decade beyond that, in ln y). The
    local fit gives each run the extra error tau * d (d: decades from the target), so its band at the target is wider
    than the global fit's and still covers the true curve."""
    import pandas as pd

    from bayescale.calibration import distance_from

    rng = np.random.default_rng(0)
    N, D = (a.ravel() for a in np.meshgrid(np.geomspace(1e7, 1e9, 6), np.geomspace(1e9, 1e11, 5)))
    law = bs.get_law("chinchilla")
    d = distance_from(law, pd.DataFrame({"N": N, "D": D}), pd.DataFrame({"N": [1.5e9], "D": [2e11]}))
    assert d.min() > 0 and d.max() > 2
    loss = chinchilla_truth(N, D) * np.exp(0.1 * np.maximum(d - 1, 0) + rng.normal(0, 0.01, N.size))
    runs = pd.DataFrame({"params": N, "tokens": D, "loss": loss})
    target = {"params": 1.5e9, "tokens": 2e11}
    glob = bs.fit(runs, "chinchilla", inputs={"N": "params", "D": "tokens"}, y="loss", seed=0, **FAST)
    local = glob.with_discrepancy(0.05).localize(target, **FAST)   # tau: the fit's extrapolation error
    # each run's known error is tau x its distance from the target (ln units: se / y)
    np.testing.assert_allclose(local.runs["se"] / local.runs["y"], 0.05 * d, rtol=1e-12)
    assert local.local["tau"] == 0.05 and local.columns == glob.columns and local.discrepancy == 0.05
    assert glob.localize(target, tau=0.07, **FAST).error == glob.error   # keeps the fit's own
    band = {name: f.predict(target, levels=(0.9,), seed=0).data
            for name, f in (("global", glob.with_error(None)), ("local", local))}
    width = {k: float(np.log(b.curve_upper[0, 0] / b.curve_lower[0, 0])) for k, b in band.items()}
    assert width["local"] > 1.5 * width["global"]
    truth = chinchilla_truth(1.5e9, 2e11)
    assert float(band["local"].curve_lower[0, 0]) < truth < float(band["local"].curve_upper[0, 0])
    back = bs.load_fit(local.save(tmp_path / "local.nc"))
    assert back.local["tau"] == 0.05 and back.local["targets"].equals(local.local["targets"])
    with pytest.raises(bs.BayescaleError, match="calibrate the fit first"):
        glob.with_error(None).localize(target)
    # recalibrate (the default after fit.calibrate()): the local fit's own extrapolation error is re-estimated by
    # leave-future-out on the local fit, whose held-out refit keeps the runs' extra errors
    relocal = glob.with_discrepancy(0.05).localize(target, recalibrate=True, **FAST)
    assert relocal.local["tau"] == 0.05 and relocal.calibration is not None
    # the local fit's extrapolation error: its own held-out estimate, never below the global fit's
    assert relocal.discrepancy == max(relocal.calibration.tau, 0.05)
    sub = next(iter(relocal.calibration.refits.values()))
    assert "se" in sub.runs and (sub.runs["se"] > 0).all()


class _Refit:
    """A stand-in refit (``refit(runs, seed) -> fit``) predicting the mean of the runs it saw, recording them."""

    def __init__(self, seen):
        self.seen = seen

    def __call__(self, runs, seed):
        self.seen.append((sorted(runs["x"]), seed))
        level = float(np.exp(np.log(runs["y"]).mean()))

        class Draws:
            sigma = np.full(10, 0.01)

            def mean(self, frame):
                return np.full((10, len(frame)), level)

        fit = type("Refit", (), {"likelihood": "lognormal", "df": 4.0})()
        fit.posterior_draws = lambda n, seed=0, discrepancy=None: Draws()
        return fit


def test_own_errors_refit_without_each_block_and_everything_beyond_it():
    from bayescale.calibration import own_errors

    runs = pd.DataFrame({"x": 2.0 ** np.arange(12), "y": np.linspace(3.0, 2.0, 12)})
    seen = []
    table, how = own_errors(bs.get_law("M2"), runs, _Refit(seen), holdout=0.25, seed=5)
    # the 3 largest runs, nearest first, one block each: refits without them and everything further out
    assert [len(s) for s, _ in seen] == [9, 10, 11] and [sd for _, sd in seen] == [5, 6, 7]
    assert list(table["block"]) == [0, 1, 2] and "refits without the 3 largest runs in 3 blocks" in how
    # each held-out run's error is against its own refit's prediction (the mean of the runs it saw)
    y = runs["y"].to_numpy()
    assert table["r"].to_numpy() == pytest.approx(np.log(y[9:]) - [np.log(y[:k]).mean() for k in (9, 10, 11)])
    assert table["s"].to_numpy() == pytest.approx(0.01) and (table["beyond"] > 0).all()
    # a ladder too short to refit on fewer runs relies on the prior, and says so
    empty, why = own_errors(bs.get_law("M2"), runs.head(3), _Refit([]))
    assert empty.empty and "no run could be held out" in why

    def refuse(runs, seed):  # a refit the runs below a block cannot make (say a data check fails there)
        raise bs.RunTableError("too few runs")

    none, why = own_errors(bs.get_law("M2"), runs, refuse)
    assert none.empty and "no refit" in why


def test_a_fit_sees_its_own_runs_bend_away_from_the_law():
    # a power law whose slope doubles beyond x = 30: the refits without the largest runs miss them, by much more
    # than their own predictive sd (importance-sampled leave-future-out errors, used before, hid most of it)
    x = np.logspace(0, 3, 16)
    y = np.where(x <= 30, 3.0 * x**-0.1, 3.0 * 30**-0.1 * (x / 30) ** -0.2)
    f = bs.fit(pd.DataFrame({"x": x, "y": y * np.exp(np.random.default_rng(0).normal(0, 0.002, 16))}), "M2",
               x="x", y="y", seed=0, **FAST)
    own, how = f.own_errors()
    assert "refits" in how and len(own) == 4
    assert np.mean(own["r"] ** 2 / own["s"] ** 2) > 1.5 and (own["r"] < 0).all()
    # and they widen its extrapolation error beyond what the corpus expects of a curve like it
    prior = default_error_model().posterior("M2", fitted_span(f.law, f.scales), f.noise_level)
    assert f.error.tau > 1.5 * prior.tau


def test_a_fits_own_error_refits_take_the_configured_chains_and_draws(chinchilla_fit, monkeypatch):
    from bayescale import config

    calls = []

    def refit(self, runs, seed=None, law=None, **over):
        calls.append(over)
        raise bs.RunTableError("recorded")  # own_errors skips the block: no sampling needed here

    monkeypatch.setattr(bs.Fit, "refit", refit)
    monkeypatch.setitem(config.settings, "lfo.refit_chains", 1)
    monkeypatch.setitem(config.settings, "lfo.refit_draws", 50)
    own, how = chinchilla_fit.with_error("default").own_errors(holdout=0.3)
    assert own.empty and "no refit" in how
    # at most the fit's own settings (2 chains, 300 + 300 here), capped by the two settings
    assert calls and all(c == dict(chains=1, warmup=50, samples=50) for c in calls)


def test_calibrate_scores_its_refits_as_the_fits_own_errors_do():
    """calibrate() and a fit's own leave-future-out errors read a refit the same way (one formula: the refit's mean
    of ln mu and its predictive sd, no sampled noise), and calibrate() refuses outcomes <= 0 naming the rows, before
    any refit."""
    from types import SimpleNamespace

    from bayescale.calibration import calibrate, own_errors

    law = bs.get_law("M2")
    runs = pd.DataFrame({"x": 2.0 ** np.arange(12), "y": np.linspace(3.0, 2.0, 12)})
    seen = []
    stub = _Refit(seen)
    cal = calibrate(SimpleNamespace(law=law, runs=runs, seed=0), holdout=0.25, seed=5,
                    refit=lambda fit, sub_runs, seed, refit_law: stub(sub_runs, seed))
    own, _ = own_errors(law, runs, _Refit([]), holdout=0.25, seed=5)
    assert [len(s) for s, _ in seen] == [9] and cal.method == "holdout"
    # the refit without the 3 largest runs predicts them; its error at the nearest is own_errors' first block's
    assert cal.heldout[["r", "s", "beyond"]].iloc[0].to_numpy() == pytest.approx(
        own[["r", "s", "beyond"]].iloc[0].to_numpy(), rel=1e-12)
    assert list(cal.heldout["x"]) == list(runs["x"].iloc[9:]) and cal.heldout["s"].to_numpy() == pytest.approx(0.01)
    with pytest.raises(bs.RunTableError, match=r"1 run\(s\) have y <= 0 \(rows \[2\]"):
        calibrate(SimpleNamespace(law=law, runs=runs.assign(y=runs["y"].where(runs.index != 2, 0.0)), seed=0),
                  refit=lambda *a: pytest.fail("refitted before checking the outcomes"))
