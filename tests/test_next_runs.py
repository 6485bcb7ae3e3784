"""Next-run selection: prefers the informative run, greedy batches within a budget, targets, CLI, bad inputs."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.pfn.prior import RUN_TABLE
from bayescale.posterior import posterior_draws
from bayescale.cli import main
from bayescale.decisions import SearchOptions, candidate_grid, next_runs, parse_target

TARGET = {"N": 7e10, "D": 1.4e12}


@pytest.fixture(scope="module")
def hand_made(chinchilla_runs):
    """A near-duplicate (0.1% larger) of an existing small run and a run beyond the data, toward the target; equal
    costs. (An exact duplicate is left out: ``test_runs_already_trained_are_not_candidates``.)"""
    dup = chinchilla_runs.iloc[0]
    return pd.DataFrame({"params": [dup["params"] * 1.001, 4e9], "tokens": [dup["tokens"], 4e11], "cost": [1.0, 1.0],
                         "name": ["duplicate", "beyond"]})


def test_prefers_run_beyond_the_data_over_a_duplicate(chinchilla_fit, hand_made):
    chinchilla_fit = chinchilla_fit.with_error(None)  # the posterior's own variance (the error's: the test below)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = next_runs(chinchilla_fit, hand_made, target=TARGET, k=1, seed=0)
    assert table.iloc[0]["name"] == "beyond" and table.iloc[0]["chosen"] and table.iloc[0]["batch"] == 1
    by = table.set_index("name")
    assert by.loc["beyond", "expected_var_reduction"] > 3 * max(by.loc["duplicate", "expected_var_reduction"], 0)
    assert by.loc["beyond", "expected_sd_after"] < by.loc["beyond", "target_sd"]
    assert not by.loc["duplicate", "chosen"]
    # the variance now is the variance of the log mean curve at the target over the posterior draws
    d = posterior_draws(chinchilla_fit, max_draws=1000)
    direct = np.log(d.mean(pd.DataFrame([TARGET]))).var(axis=0).mean()
    assert table.attrs["var_before"] == pytest.approx(direct, rel=1e-9)
    assert ((table["ess_median"] > 1) & (table["ess_median"] <= d.size + 1e-9)).all()
    # the most-uncertain-point column: a run beyond the data is more uncertain than a duplicate of a fitted one
    assert by.loc["beyond", "candidate_sd"] > by.loc["duplicate", "candidate_sd"]


def test_runs_already_trained_are_not_candidates(chinchilla_fit, chinchilla_runs, capsys, tmp_path):
    have = chinchilla_runs.nlargest(2, "params")[["params", "tokens"]]
    cands = pd.concat([have, pd.DataFrame({"params": [2e10], "tokens": [4e11]})], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = next_runs(chinchilla_fit, cands, target=TARGET, k=1, seed=0, search=SearchOptions(n_outcomes=8))
    assert len(table) == 1 and table.iloc[0]["params"] == 2e10 and table.attrs["already_have"] == 2
    tiny = pd.DataFrame({"params": [4e8], "tokens": [8e9]})   # a run among the fitted ones: buys nothing
    # 64 outcomes: with 8 the estimate of its (nil) reduction scatters by about 1% across seeds, the threshold itself
    with pytest.warns(UserWarning, match="no candidate is expected to narrow the target by 1%"):
        useless = next_runs(chinchilla_fit, tiny, target=TARGET, k=1, seed=0, search=SearchOptions(n_outcomes=64))
    assert "buys nothing measurable" in useless.attrs["warning"]
    with pytest.raises(bs.BayescaleError, match="every one of the 2 candidate runs is a run you already have"):
        next_runs(chinchilla_fit, have, target=TARGET, k=1, seed=0)
    path = chinchilla_fit.save(tmp_path / "f.nc")
    have.to_csv(tmp_path / "have.csv", index=False)
    assert main(["next-runs", str(path), "--candidates", str(tmp_path / "have.csv"), "--target",
                 "N=70B,D=1.4T"]) != 0
    out = capsys.readouterr()
    assert "already have" in out.err and "Traceback" not in out.err


def test_cost_changes_the_choice(chinchilla_fit, hand_made):
    cands = hand_made.assign(cost=[1.0, 1e6])   # the informative run is now a million times dearer
    table = next_runs(chinchilla_fit, cands, target=TARGET, k=1, seed=0)
    by = table.set_index("name")
    assert by.loc["beyond", "expected_var_reduction"] > by.loc["duplicate", "expected_var_reduction"]
    # score = expected reduction less its Monte Carlo error, per unit cost
    expect = np.maximum(table["expected_var_reduction"] - table["reduction_se"], 0) / table["cost"]
    np.testing.assert_allclose(table["score"], expect)
    assert by.loc["beyond", "score"] < by.loc["beyond", "expected_var_reduction"] / 1e5
    # cost_power=0 ignores the cost: the most informative run wins again
    free = next_runs(chinchilla_fit, cands, target=TARGET, k=1, seed=0, search=SearchOptions(cost_power=0.0))
    assert free.iloc[0]["name"] == "beyond"
    with pytest.raises(bs.BayescaleError, match="cost_power"):
        next_runs(chinchilla_fit, cands, target=TARGET, search=SearchOptions(cost_power=-1.0))


def test_goal_mode_buys_the_cheapest_run_that_suffices(chinchilla_fit, hand_made):
    cands = hand_made.assign(cost=[1.0, 2.0])
    plain = next_runs(chinchilla_fit, cands, target=TARGET, seed=0)
    assert plain.iloc[0]["name"] == "beyond"
    loose = next_runs(chinchilla_fit, cands, target=TARGET, seed=0,
                      search=SearchOptions(target_sd=10 * plain.attrs["var_before"] ** 0.5))
    assert loose["reaches_target_sd"].all() and loose.iloc[0]["name"] == "duplicate"   # both suffice: the cheaper
    by = plain.set_index("name")
    mid = float(np.sqrt(0.5 * (by.loc["beyond", "expected_sd_after"] ** 2 + by.loc["duplicate", "expected_sd_after"] ** 2)))
    tight = next_runs(chinchilla_fit, cands, target=TARGET, seed=0, search=SearchOptions(target_sd=mid))
    assert tight.iloc[0]["name"] == "beyond" and tight.set_index("name").loc["beyond", "reaches_target_sd"]
    with pytest.raises(bs.BayescaleError, match="target_sd"):
        next_runs(chinchilla_fit, cands, target=TARGET, search=SearchOptions(target_sd=0.0))


def test_horizon_compares_plans_not_single_runs(chinchilla_fit):
    """Small runs inside the data are cheap and each narrows the target a little (per unit cost they win); one run
    beyond the data narrows it far more than all of them together. Within a horizon that affords the big run, the
    plan comparison buys it; without one, the myopic per-cost choice buys a small run."""
    small = pd.DataFrame({"params": np.geomspace(1e7, 1e9, 6)[[0, 1, 2, 3, 4, 5, 0, 1]],
                          "tokens": [1.5e9] * 6 + [7e10] * 2, "name": [f"small{i}" for i in range(8)]})
    cands = pd.concat([small, pd.DataFrame({"params": [4e9], "tokens": [4e11], "name": ["beyond"]})],
                      ignore_index=True).assign(cost=1.0)
    equal = next_runs(chinchilla_fit, cands, target=TARGET, seed=0).set_index("name")
    gain = equal["expected_var_reduction"]
    big = 3 * gain["beyond"] / gain.drop("beyond").max()       # per unit cost the best small run now wins 3:1
    cands.loc[cands["name"] == "beyond", "cost"] = big
    myopic = next_runs(chinchilla_fit, cands, target=TARGET, seed=0)
    assert myopic.iloc[0]["name"] != "beyond" and "plan_reduction" not in myopic
    planned = next_runs(chinchilla_fit, cands, target=TARGET, seed=0, search=SearchOptions(horizon=big))
    assert planned.iloc[0]["name"] == "beyond" and planned.iloc[0]["chosen"]
    plans = planned.attrs["plans"]
    assert len(plans) >= 2 and all(p["cost"] <= big * (1 + 1e-12) for p in plans)
    for p in plans:   # a plan's reduction is the sum of its picks' expected reductions, its cost their costs' sum
        assert p["reduction"] == pytest.approx(sum(p["gains"]))
        assert p["cost"] == pytest.approx(cands["cost"].to_numpy()[p["runs"]].sum())
    best = max(plans, key=lambda p: p["reduction"])
    assert cands["name"][best["first"]] == "beyond"
    by = planned.set_index("name")
    assert by.loc["beyond", "plan_reduction"] > np.nanmax(by.drop("beyond")["plan_reduction"])
    # a horizon too small for the big run leaves the small runs' plan
    short = next_runs(chinchilla_fit, cands, target=TARGET, seed=0, search=SearchOptions(horizon=big / 2))
    assert short.iloc[0]["name"] != "beyond"
    with pytest.raises(bs.BayescaleError, match="horizon"):
        next_runs(chinchilla_fit, cands, target=TARGET, search=SearchOptions(horizon=-1.0))


def test_extrapolation_error_counts_and_shrinks_toward_the_target(chinchilla_fit, hand_made):
    """With a calibrated extrapolation error tau, the target's variance gains tau^2 b^2 (b: decades beyond the
    runs, as in the bands), and a run that extends the range toward the target removes part of it; a duplicate
    of a fitted run removes none of it."""
    from bayescale.runs import distance_beyond, query_points

    tau = 0.1
    plain = next_runs(chinchilla_fit.with_error(None), hand_made, target=TARGET, seed=0).set_index("name")
    cal = next_runs(chinchilla_fit.with_discrepancy(tau), hand_made, target=TARGET, seed=0)
    assert cal.attrs["extrapolation_tau"] == pytest.approx(tau) and plain.attrs["extrapolation_tau"] == 0
    b = distance_beyond(chinchilla_fit.law, query_points(chinchilla_fit.law, TARGET, chinchilla_fit.columns),
                        chinchilla_fit.scales)
    assert b[0] > 0
    assert cal.attrs["var_before"] - plain.attrs["var_before"] == pytest.approx(tau**2 * b[0] ** 2, rel=1e-9)
    by = cal.set_index("name")
    extra = by["expected_var_reduction"] - plain["expected_var_reduction"]
    assert extra["duplicate"] == pytest.approx(0, abs=1e-12)
    # the "beyond" run (4e9 params, 4e11 tokens) brings the range's end closer to the target: b shrinks to b_new
    law, sc = chinchilla_fit.law, chinchilla_fit.scales
    tn, td = np.log(4e9) - sc.center["N"], np.log(4e11) - sc.center["D"]
    grown = sc._replace(hi={**sc.hi, "N": max(sc.hi["N"], tn), "D": max(sc.hi["D"], td)},
                        joint_hi=max(sc.joint_hi, (tn + td) / 2))
    b_new = distance_beyond(law, query_points(law, TARGET, chinchilla_fit.columns), grown)
    assert 0 <= b_new[0] < b[0]
    assert extra["beyond"] == pytest.approx(tau**2 * (b[0] ** 2 - b_new[0] ** 2), rel=1e-9)


def test_a_run_larger_in_n_times_d_than_every_fitted_run_is_beyond_them(chinchilla_runs):
    """Beyond the runs in compute, inside each input's range (the Chinchilla runs above 1e21 FLOP are mostly such):
    the distance, and so the extrapolation error, is not 0."""
    from bayescale.runs import distance_beyond
    from tests.conftest import FAST

    small = chinchilla_runs[chinchilla_runs["params"] * chinchilla_runs["tokens"] <= 1e18]
    f = bs.fit(small, "chinchilla", inputs={"N": "params", "D": "tokens"}, y="loss", seed=0, **FAST)
    n_max, d_max, nd_max = small["params"].max(), small["tokens"].max(), (small["params"] * small["tokens"]).max()
    corner = pd.DataFrame({"N": [n_max], "D": [d_max]})  # inside both ranges, beyond every run's N x D
    b = distance_beyond(f.law, corner, f.scales)[0]
    assert b == pytest.approx(np.log10(n_max * d_max / nd_max) / 2, rel=1e-6) and b > 0.5
    band = f.predict(corner, levels=(0.9,), seed=0)
    raw = f.predict(corner, levels=(0.9,), seed=0, raw=True)
    width = lambda x: float(np.subtract(*x.interval(0.9)[::-1])[0])  # noqa: E731
    assert band["beyond"].values[0] == pytest.approx(b) and width(band) > 1.2 * width(raw)


def test_greedy_batch_and_budget(chinchilla_fit):
    grid = candidate_grid(params=np.geomspace(1e7, 4e9, 4), tokens=np.geomspace(1e9, 4e11, 4))
    assert len(grid) == 16
    table = next_runs(chinchilla_fit, grid, target="compute_optimal=1e23", k=3, seed=1,
                      search=SearchOptions(n_outcomes=16))
    chosen = table[table["chosen"]]
    assert list(chosen["batch"]) == [1, 2, 3] and len(chosen.drop_duplicates(["params", "tokens"])) == 3
    np.testing.assert_allclose(table["cost"], 6 * table["params"] * table["tokens"])
    assert table.attrs["target"] == "compute_optimal"
    budget = float(np.sort(table["cost"])[2])
    within = next_runs(chinchilla_fit, grid, target=TARGET, k=5, budget=budget, seed=1,
                       search=SearchOptions(n_outcomes=16))
    assert within.loc[within["chosen"], "cost"].sum() <= budget
    assert within.attrs["batch_cost"] == pytest.approx(within.loc[within["chosen"], "cost"].sum())


def test_same_seed_same_answer(chinchilla_fit, hand_made):
    a = next_runs(chinchilla_fit, hand_made, target=TARGET, seed=3, search=SearchOptions(n_outcomes=8))
    b = next_runs(chinchilla_fit, hand_made, target=TARGET, seed=3, search=SearchOptions(n_outcomes=8))
    pd.testing.assert_frame_equal(a, b)


def test_bad_inputs(chinchilla_fit, hand_made):
    with pytest.raises(bs.BayescaleError, match="tokens"):
        next_runs(chinchilla_fit, hand_made.drop(columns="tokens"), target=TARGET)
    with pytest.raises(bs.BayescaleError, match="cost"):
        next_runs(chinchilla_fit, hand_made.assign(cost=[1.0, -1.0]), target=TARGET)
    with pytest.raises(bs.BayescaleError, match="cost column"):
        next_runs(chinchilla_fit, hand_made, target=TARGET, cost="price")
    with pytest.raises(bs.BayescaleError, match="k"):
        next_runs(chinchilla_fit, hand_made, target=TARGET, k=0)
    with pytest.raises(bs.BayescaleError, match="budget"):
        next_runs(chinchilla_fit, hand_made, target=TARGET, budget=-1.0)
    with pytest.raises(bs.BayescaleError, match="method"):
        next_runs(chinchilla_fit, hand_made, target=TARGET, method="bald")
    with pytest.raises(bs.BayescaleError, match="target"):
        next_runs(chinchilla_fit, hand_made, target=None)
    with pytest.raises(bs.BayescaleError, match="compute_optimal"):
        next_runs(chinchilla_fit, hand_made, target="compute_optimal=lots")
    with pytest.raises(bs.BayescaleError, match="empty"):
        next_runs(chinchilla_fit, hand_made.iloc[:0], target=TARGET)
    with pytest.raises(bs.BayescaleError, match="law="):
        next_runs(pd.DataFrame({"N": [1.0]}), hand_made, target=TARGET)


def test_pfn_method(chinchilla_fit):
    try:
        from bayescale import pfn
        ready = pfn.available()
    except ImportError:
        ready = False
    curve = pd.DataFrame({"x": np.geomspace(1e6, 1e8, 6)})
    curve["y"] = 0.3 + 2.0 * curve["x"] ** -0.15
    cands = {"x": [2e8, 5e8, 1e9]}
    if not ready:
        with pytest.raises((bs.BayescaleError, ImportError)):
            next_runs(curve, cands, target={"x": [1e10]}, method="pfn", x="x", y="y")
        pytest.skip("the PFN's weights are not available: only the guard was checked")
    table = next_runs(curve, cands, target={"x": [5e9, 1e10]}, method="pfn", x="x", y="y", k=2, seed=0,
                      search=SearchOptions(n_outcomes=8))
    assert len(table) == 3 and table["chosen"].sum() == 2 and list(table.loc[table["chosen"], "batch"]) == [1, 2]
    np.testing.assert_allclose(np.sort(table["cost"]), [2e8, 5e8, 1e9])
    assert (table["target_sd"] > 0).all() and np.isfinite(table["expected_sd_after"]).all()
    with pytest.raises(bs.BayescaleError, match="run table"):
        next_runs(chinchilla_fit, cands, target={"x": [1e10]}, method="pfn")
    with pytest.raises(bs.BayescaleError, match="horizon"):
        next_runs(curve, cands, target={"x": [1e10]}, method="pfn", x="x", y="y", search=SearchOptions(horizon=1e9))


def test_cli_next_runs(chinchilla_runs, tmp_path, capsys):
    path = tmp_path / "runs.csv"
    chinchilla_runs.to_csv(path, index=False)
    out = tmp_path / "ranked.csv"
    rc = main(["next-runs", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--target", "N=7e10,D=1.4e12",
               "--grid", "N=1e7:4e9:3", "--grid", "D=1e9,4e11", "--k", "2", "--chains", "2", "--warmup", "300",
               "--samples", "300", "--quiet", "--outcomes", "8", "--out", str(out)])
    assert rc == 0
    ranked = pd.read_csv(out)
    assert len(ranked) == 5 and ranked["chosen"].sum() == 2   # 6 in the grid; (1e7, 1e9) is a fitted run
    sd_global = float(ranked["target_sd"].iloc[0])
    printed = capsys.readouterr().out
    assert "posterior sd of log loss" in printed and "left out 1 candidate you already have" in printed
    rc = main(["next-runs", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--target", "N=7e10,D=1.4e12",
               "--grid", "N=1e7:4e9:3", "--grid", "D=1e9,4e11", "--chains", "2", "--warmup", "300", "--samples", "300",
               "--quiet", "--outcomes", "8", "--horizon", "1e21", "--out", str(out)])
    ranked = pd.read_csv(out)
    assert rc == 0 and ranked["plan_reduction"].notna().any() and ranked["chosen"].sum() == 1
    capsys.readouterr()
    rc = main(["next-runs", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--target", "N=7e10,D=1.4e12",
               "--grid", "N=1e7:4e9:3", "--grid", "D=1e9,4e11", "--horizon", "-1"])
    assert rc == 2 and "--horizon" in capsys.readouterr().err
    # a local fit: the candidates' extra error is tau x their distance from the target, as in the API
    rc = main(["next-runs", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--target", "N=7e10,D=1.4e12",
               "--grid", "N=1e7:4e9:3", "--grid", "D=1e9,4e11", "--chains", "2", "--warmup", "300", "--samples", "300",
               "--quiet", "--outcomes", "8", "--local", "0.1", "--out", str(out)])
    assert rc == 0 and "extra error of 0.1 per decade" in capsys.readouterr().out
    ranked = pd.read_csv(out)
    # every run is more than a decade from the target: discounted, they leave the target less certain
    assert len(ranked) == 5 and float(ranked["target_sd"].iloc[0]) > sd_global
    for bad in ("-1", "x"):
        rc = main(["next-runs", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--target",
                   "N=7e10,D=1.4e12", "--grid", "N=1e7:4e9:3", "--grid", "D=1e9,4e11", "--local", bad])
        assert rc == 2 and "--local" in capsys.readouterr().err
    rc = main(["next-runs", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--target", "N=7e10,D=1.4e12",
               "--chains", "2", "--warmup", "300", "--samples", "300", "--quiet"])
    assert rc == 2 and "--candidates" in capsys.readouterr().err


def test_local_fit_gives_candidates_the_same_extra_error(chinchilla_fit, hand_made):
    """A local fit's candidates carry tau x their distance from the target, like its runs: the duplicate of a small,
    far run tells less than under the global noise model; an explicit run_error gives the same table."""
    from bayescale.posterior import posterior_draws
    from bayescale.calibration import distance_from

    tau = 0.1
    local = chinchilla_fit.localize(TARGET, tau=tau, chains=2, warmup=300, samples=300, progress=False)
    cand = hand_made.rename(columns={"params": "N", "tokens": "D"})
    d = distance_from(local.law, cand, pd.DataFrame([TARGET]))
    assert d[0] > d[1] > 0
    auto = next_runs(local, hand_made, target=TARGET, seed=0)
    explicit = next_runs(local, hand_made, target=TARGET, seed=0, run_error=tau * d)
    pd.testing.assert_frame_equal(auto, explicit)
    assert auto.attrs["run_error_max"] == pytest.approx(tau * d.max())
    np.testing.assert_allclose(auto.set_index("name").loc[list(hand_made["name"]), "run_error"], tau * d, rtol=1e-12)
    none = next_runs(local, hand_made, target=TARGET, seed=0, run_error=0.0).set_index("name")
    by = auto.set_index("name")
    assert by.loc["duplicate", "expected_var_reduction"] < none.loc["duplicate", "expected_var_reduction"]
    # the (default, log-Student-t) noise model with the extra error, exactly: ln y ~ t_df(ln mu, sqrt(sigma^2 + e^2))
    assert local.likelihood == "logstudentt"
    dr = posterior_draws(local, max_draws=50)
    mu = dr.mean(cand)
    y = mu[:1] * 1.01
    sd = np.sqrt(dr.sigma[:, None] ** 2 + (tau * d)[None, :] ** 2)
    from scipy import stats
    expect = stats.t.logpdf(np.log(y), local.df, np.log(mu), sd) - np.log(y)
    np.testing.assert_allclose(dr.logpdf(y, mu, tau * d), expect, rtol=1e-10)
    for bad, match in ((-0.1, "row 0"), ([0.1], "one per candidate"), ("nope", "run_error column"),
                       ([0.1, np.nan], "row 1")):
        with pytest.raises(bs.BayescaleError, match=match):
            next_runs(local, hand_made, target=TARGET, run_error=bad)


def test_search_options_and_external_inputs(chinchilla_fit, hand_made):
    """SearchOptions checks its settings when made; the PFN's run table (a law computed outside bayescale) reads
    targets as a law with the same inputs does."""
    assert SearchOptions() == SearchOptions(n_outcomes=32, max_draws=1000, cost_power=1.0)
    for bad, what in ((dict(n_outcomes=1), "n_outcomes"), (dict(max_draws=0), "max_draws"),
                      (dict(cost_power=np.nan), "cost_power"), (dict(target_sd=-1.0), "target_sd"),
                      (dict(horizon=0.0), "horizon")):
        with pytest.raises(bs.BayescaleError, match=what):
            SearchOptions(**bad)
    with pytest.raises(bs.BayescaleError, match="SearchOptions"):
        next_runs(chinchilla_fit, hand_made, target=TARGET, search={"n_outcomes": 8})
    one = RUN_TABLE
    assert one.input_names == ("x",)
    kind, points = parse_target({"steps": [1e9, 2e9]}, one, {"x": "steps"})
    assert kind == "points" and points["x"].tolist() == [1e9, 2e9]
    with pytest.raises(bs.BayescaleError, match="compute_optimal"):
        parse_target("compute_optimal=1e24", one)
    law = bs.get_law("chinchilla")
    pd.testing.assert_frame_equal(parse_target("N=7e10;1e9,D=1.4e12;2e10", bs.laws.external_law("ext", "?", law.inputs))[1],
                                  parse_target("N=7e10;1e9,D=1.4e12;2e10", law)[1])
