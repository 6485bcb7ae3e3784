"""The demo's figure (the demo itself fits three times; ``bayescale demo --quick`` runs it end to end)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bayescale.bands import make_bands
from bayescale.demo import CUTOFF, plot_demo


def test_demo_plot_shows_the_prediction_at_each_held_out_run():
    """Each held-out run is drawn at its own (N, D), whatever its tokens per parameter: median, 50% and 90% bars of
    the bands compared with it, beside its observed loss; D = 20 N is only a guide, with no band (issue 18)."""
    rng = np.random.default_rng(0)
    n = np.array([1e9, 3e9, 1e10, 2e10])
    test = pd.DataFrame({"N": n, "D": n * np.array([1.0, 70.0, 5.0, 20.0])})
    test["C"] = 6 * test["N"] * test["D"]
    test["loss"] = 2.0 + 400 / test["N"] ** 0.34
    train = pd.DataFrame({"N": [1e8, 3e8], "D": [2e9, 6e9], "loss": [2.8, 2.6]}).assign(C=lambda d: 6 * d.N * d.D)
    mu = (test["loss"].to_numpy() * 1.01)[None] * np.exp(rng.normal(0, 0.03, (400, len(test))))
    bands = make_bands(test[["N", "D"]], mu, mu, (0.5, 0.9))
    grid = np.geomspace(1e18, 1e22, 20)
    ax = plot_demo(train, test, bands, guide=(grid, 2 + grid ** -0.05))
    try:
        med = bands["run_median"].values
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        np.testing.assert_allclose(lines["predicted median"].get_xdata(), test["C"])
        np.testing.assert_allclose(lines["predicted median"].get_ydata(), med)
        bars = {c.get_label(): c for c in ax.containers}
        for lv in (0.5, 0.9):
            (label,) = [k for k in bars if k.startswith(f"{lv:.0%} band at each held-out run's own (N, D)")]
            segs = bars[label].lines[2][0].get_segments()
            lo, hi = bands.interval(lv)
            np.testing.assert_allclose([s[0] for s in segs], np.c_[test["C"], lo])
            np.testing.assert_allclose([s[1] for s in segs], np.c_[test["C"], hi])
        observed = next(c for c in ax.collections if c.get_label() == "held-out runs (observed)")
        np.testing.assert_allclose(observed.get_offsets(), np.c_[test["C"], test["loss"]])
        shaded = [c for c in ax.collections if "Poly" in type(c).__name__]
        assert not shaded and "median along D = 20 N (guide only)" in lines  # a guide, no band where no run lies
        assert ax.get_xlabel().startswith("training compute") and CUTOFF in [ln.get_xdata()[0] for ln in ax.get_lines()]
    finally:
        plt.close(ax.figure)
