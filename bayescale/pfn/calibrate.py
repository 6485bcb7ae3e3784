"""Post-hoc recalibration of the PFN predictive (Kuleshov et al. 2018), fitted on held-out prior draws only.

With ``p = F(y)`` the network's predictive CDF at the observed value (its PIT), the map ``R(p) = P(F(Y) <= p)`` is
estimated on synthetic prior draws and applied everywhere: ``cdf' = R(F)``, ``quantile'(q) = F^{-1}(R^{-1}(q))``,
``logpdf' = logpdf + ln R'(F)``. ``R`` is piecewise linear through the knots ``(Q_pit(l_j), l_j)``: the empirical
quantiles of the PIT at a fixed grid of levels ``l_j`` (:data:`LEVEL_GRID`), with ``(0, 0)`` and ``(1, 1)`` added,
strictly increasing so it is invertible. One map for extrapolated queries (outside the context's x range) and one
for interpolated queries, each from both context/target splits of the prior (prefix and random subset). The map
object, read and applied at prediction, is :class:`bayescale.pfn.recalibration.Recalibration`; this module fits it.

Seeds: calibration curves come from ``sample_prior(CALIB_SEED + 2 i, split="prefix")`` and
``sample_prior(CALIB_SEED + 2 i + 1, split="random")``, ``i < n_batches``; disjoint from training
(``fold_in(PRNGKey(seed), 1_000_000 + step)``), validation (10_000_000+), the bin borders (987_654+) and the
benchmark's test draws (``benchmarks/pfn.py``: 20_000_000-20_000_002). No real data is used.

``bayescale pfn calibrate [--weights PATH] [--curves N]`` or ``python -m bayescale.pfn.calibrate`` writes the map
into the weights' JSON (key ``recalibration``); ``bayescale pfn train`` does so after training.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from bayescale.pfn.infer import load, predictive_many
from bayescale.pfn.prior import sample_prior
from bayescale.pfn.recalibration import KINDS, Recalibration
from bayescale.pfn.weights import weights_path

__all__ = ["CALIB_SEED", "LEVEL_GRID", "fit_map", "fit_recalibration", "pit_values"]

CALIB_SEED = 30_000_000
# every central-interval end of 50-99% is a knot, so those intervals are exact on the calibration draws
LEVEL_GRID = np.array([0.005, 0.01, 0.025, 0.05, 0.075, *np.round(np.arange(0.1, 0.91, 0.05), 3), 0.925, 0.95,
                       0.975, 0.99, 0.995])
MIN_GAP = 1e-6  # smallest step between PIT knots (ties in the PIT would otherwise make R non-invertible)
DESCRIPTION = ("Kuleshov et al. (2018) recalibration: cdf' = R(F), R piecewise linear through (PIT quantile, level) "
               "knots, fitted on synthetic prior draws (no real data), one map per query kind")


def fit_map(pit, levels=LEVEL_GRID) -> tuple[np.ndarray, np.ndarray]:
    """Knots ``(pit, level)`` of ``R``: the PIT's empirical quantiles at ``levels``, pinned at (0, 0) and (1, 1)."""
    pit = np.asarray(pit, float)
    pit = pit[np.isfinite(pit)]
    levels = np.asarray(levels, float)
    if len(pit) < 10 * len(levels):
        raise ValueError(f"{len(pit)} PIT values are too few for a {len(levels)}-knot map")
    x = np.clip(np.quantile(pit, levels), MIN_GAP, 1 - MIN_GAP * (len(levels) + 1))
    for i in range(1, len(x)):
        x[i] = max(x[i], x[i - 1] + MIN_GAP)
    return np.r_[0.0, x, 1.0], np.r_[0.0, levels, 1.0]


def pit_values(weights=None, n_curves: int = 4096, seed: int = CALIB_SEED, batch: int = 512, families=None,
               n_points: int | None = None) -> dict:
    """Raw PIT values of the targets of ``n_curves`` prefix and ``n_curves`` random-split prior curves, by kind.

    ``n_curves`` is rounded up to a whole number of batches; curves without targets are left out.
    """
    L = load(weights)
    n_points = n_points or L.cfg.n_points
    fams = families or L.info.get("families")
    # the prior the weights were trained on (weights from before the "prior" entry used the default shares)
    shares = {k: v for k, v in L.info.get("prior", {}).items() if k in ("bump_share", "wide_noise_share")}
    pits = {k: [] for k in KINDS}
    curves = {"prefix": 0, "random": 0}
    batch = min(batch, n_curves)
    for i in range(int(np.ceil(n_curves / batch))):
        for off, split in enumerate(("prefix", "random")):
            d = {k: np.asarray(v) for k, v in sample_prior(seed + 2 * i + off, batch, n_points, split=split,
                                                            families=fams, **shares).items()}
            items = []
            for j in range(batch):
                c, tg = d["ctx"][j], d["target"][j]
                if tg.any():
                    x = np.exp(d["t"][j])
                    items.append((x[c], d["y"][j][c], x[tg], d["y"][j][tg]))
            curves[split] += len(items)
            raw = predictive_many([it[:3] for it in items], weights=weights, calibrated=False, error="raw")
            for p, (_, _, _, yq) in zip(raw, items):
                u = p.cdf(yq)
                ext = p.beyond > 0
                pits["extrapolated"].append(u[ext])
                pits["interpolated"].append(u[~ext])
    return {"pit": {k: np.concatenate(v) for k, v in pits.items()}, "curves": curves}


def fit_recalibration(weights=None, n_curves: int = 4096, seed: int = CALIB_SEED, batch: int = 512, families=None,
                      write: bool = True, log=print) -> dict:
    """Fit both maps on fresh prior draws and (``write``) store them in the weights' JSON; returns the JSON entry."""
    res = pit_values(weights, n_curves, seed, batch, families)
    n_batches = int(np.ceil(n_curves / min(batch, n_curves)))
    knots = {k: fit_map(res["pit"][k]) for k in KINDS}
    rec = Recalibration(knots, {
        "description": DESCRIPTION,
        "seeds": f"sample_prior(seed, {min(batch, n_curves)} curves): prefix split seeds {seed}, {seed + 2}, ..., "
                 f"random split seeds {seed + 1}, {seed + 3}, ..., up to {seed + 2 * n_batches - 1}",
        "seed_range": [seed, seed + 2 * n_batches - 1],
        "curves": res["curves"], "targets": {k: len(res["pit"][k]) for k in KINDS}})
    entry = rec.to_dict()
    if write:
        meta_p = weights_path(weights).with_suffix(".json")
        info = json.loads(meta_p.read_text())
        info["recalibration"] = entry
        tmp = meta_p.with_suffix(".tmp.json")
        tmp.write_text(json.dumps(info, indent=2) + "\n")
        os.replace(tmp, meta_p)
        log(f"recalibration written to {meta_p} ({entry['targets']['extrapolated']} extrapolated, "
            f"{entry['targets']['interpolated']} interpolated targets of {sum(res['curves'].values())} prior curves)")
    return entry


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bayescale.pfn.calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--weights", help="a .npz written by `bayescale pfn train` (default: the bundled one)")
    ap.add_argument("--curves", type=int, default=4096, help="prior curves per split (default 4096)")
    ap.add_argument("--seed", type=int, default=CALIB_SEED)
    args = ap.parse_args(argv)
    fit_recalibration(args.weights, n_curves=args.curves, seed=args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
