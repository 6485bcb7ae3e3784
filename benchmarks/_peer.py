"""``simple-scaling-laws`` run side by side: the bootstrap tool a user would pick instead of bayescale.

Its default law (``separable-power``: y = E + A N^-alpha + B D^-beta over the size inputs a curve has; one input
gives E + B x^-beta), fitted to a curve's fit runs with its default settings, and its ``new-run`` draws (a wild
cluster bootstrap of the law plus resampled run-to-run noise: what one newly trained model might reach) at the
held-out runs. Install it with the ``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

NAME = "simple-scaling-laws"
# bayescale input -> the peer's column: its predictors are model sizes and dataset sizes
ROLES = {"N": "model_size__N", "D": "dataset_size__D", "x": "dataset_size__x"}


def version() -> str | None:
    """The installed peer's version, or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version(NAME)
    except PackageNotFoundError:
        return None


def peer_draws(ctx: pd.DataFrame, tgt: pd.DataFrame, inputs: list[str], seed: int, n_draws: int = 1000) -> np.ndarray:
    """The peer's ``new-run`` predictive draws ``(n_draws, len(tgt))`` of y at ``tgt``'s inputs, fitted to ``ctx``
    (input columns and ``y``). Raises LookupError for inputs that are not sizes (the loss -> error link)."""
    import polars as pl
    from simple_scaling_laws import fit

    if any(k not in ROLES for k in inputs):
        raise LookupError(f"{NAME} takes model and dataset sizes, not {inputs}")
    frame = pl.DataFrame({"training_run_id": [f"run{i}" for i in range(len(ctx))],
                          **{ROLES[k]: ctx[k].to_numpy(float) for k in inputs},
                          "test_loss__y": ctx["y"].to_numpy(float)})
    with warnings.catch_warnings():  # its notes on single runs per size and on extrapolation: expected here
        warnings.simplefilter("ignore")
        model = fit(frame, n_draws=n_draws, seed=seed)
        points = model.prepare_points(pl.DataFrame({ROLES[k]: tgt[k].to_numpy(float) for k in inputs}))
        return np.asarray(model.target_draws("test_loss__y", model.fitting_predictors(points), kind="new-run",
                                             rng=np.random.default_rng(seed)), float)
