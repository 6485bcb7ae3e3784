"""The replay benchmark's bookkeeping (benchmarks/active_learning.py, benchmarks/replay_rescore.py): which run sets
are re-scored, and how compute to reach / to stay at an error level is read off the pooled curves."""

import numpy as np

from benchmarks.active_learning import _levels_verdict, _sim_summary
from benchmarks.replay_rescore import _run_sets


def _steps(compute, rmsle):
    return [{"n": 8 + i, "compute": c, "rmsle": e, "lpd": 0.0, "sd": e, "z2": 1.0, "ok": True, "last": i}
            for i, (c, e) in enumerate(zip(compute, rmsle))]


def test_run_sets_hold_the_last_step_within_each_checkpoint():
    steps = _steps([1.0, 2.0, 5.0, 10.0, 50.0], [0.1] * 5)
    # 1.5 holds step 0, 6 holds step 2, 100 holds the last; the first and last steps are always kept
    assert _run_sets(steps, [], np.array([1.5, 6.0, 100.0])) == [0, 2, 4]
    assert _run_sets(steps, [], np.array([0.5])) == [0, 4]


def test_stay_is_later_than_a_dip_and_levels_no_baseline_reaches_are_said_so():
    # ours dips below 0.02 at compute 3, comes back above, and stays below only from compute 30
    ours = _steps([1, 3, 10, 30, 60], [0.05, 0.015, 0.04, 0.015, 0.012])
    grid = _steps([1, 20, 40, 60], [0.05, 0.03, 0.018, 0.016])
    worlds = [{"grid": grid, "ours": ours}] * 2
    sm = _sim_summary(worlds, n_acquire=3)
    thr = sm["levels"]["threshold"]
    assert thr["best_baseline"] == "grid" and np.isclose(thr["rmsle"], 0.016)
    assert thr["compute_to_reach"]["ours"] < thr["compute_to_stay"]["ours"]
    assert 3 <= thr["compute_to_reach"]["ours"] < 10 and 30 <= thr["compute_to_stay"]["ours"] < 60
    assert np.isclose(thr["ratio"]["ours"], thr["compute_to_reach"]["ours"] / thr["compute_to_reach"]["grid"])
    # 0.2 x the start (0.01): nobody gets there
    assert not np.isfinite(sm["levels"]["0.2"]["compute_to_reach"]["grid"])
    text = _levels_verdict(sm)
    assert "0.2 0.0100: no baseline reaches it" in text and "threshold 0.0160: ours" in text
