"""Plots of fits and bands (matplotlib). Every function takes ``ax=`` and ``path=`` and returns the Axes.

One-input laws get a continuous median and shaded bands over a grid; laws with several inputs get the median and
interval bars at the query points, against the input named by ``x`` (default: the first).

The package imports this module only inside the functions that draw, so matplotlib loads with the first plot.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from bayescale.runs import default_cost
from bayescale.errors import BayescaleError

__all__ = ["plot_bands", "plot_fit", "plot_frontier"]


def _axes(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.4))
    return ax


def _finish(ax, path, xlabel, ylabel, logy=True):
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        if 0 < lo and hi / lo < 30:  # within about a decade: plain numbers, not "3x10^0"
            from matplotlib.ticker import FuncFormatter

            plain = FuncFormatter(lambda v, _: f"{v:.3g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="best", fontsize=8)
    if path is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(path, dpi=120)
    return ax


def plot_bands(bands, x: str | None = None, observed=None, ax=None, path=None, color="C0", label="median",
               kind: str = "run", logy: bool = True, band_label: str | None = None):
    """Median and central intervals of ``bands`` against input ``x``; ``observed`` adds the true values.

    ``label`` names the median in the legend and ``band_label`` the intervals, formatted with ``level`` and ``kind``
    (e.g. ``"PFN {level:.0%} band"``; default ``"{level:.0%} {kind} band"``, or ``interval`` for bars): give both to
    keep two bands on one Axes apart.
    """
    ax = _axes(ax)
    x = x or bands.inputs[0]
    xs = bands.data[x].values
    order = np.argsort(xs)
    levels = sorted(bands.levels, reverse=True)
    med = bands.data[f"{kind}_median"].values
    continuous = len(bands.inputs) == 1 and len(xs) > 10
    for i, lv in enumerate(levels):
        lo, hi = bands.interval(lv, kind)
        alpha = 0.15 + 0.25 * i / max(len(levels) - 1, 1)
        if continuous:
            ax.fill_between(xs[order], lo[order], hi[order], color=color, alpha=alpha, lw=0,
                            label=(band_label or "{level:.0%} {kind} band").format(level=lv, kind=kind))
        else:
            ax.errorbar(xs, med, yerr=[med - lo, hi - med], fmt="none", ecolor=color, alpha=alpha + 0.2,
                        elinewidth=2 + 3 * i,
                        label=(band_label or "{level:.0%} {kind} interval").format(level=lv, kind=kind))
    if continuous:
        ax.plot(xs[order], med[order], color=color, lw=1.8, label=label)
    else:
        ax.plot(xs, med, "o", color=color, ms=4, label=label)
    if observed is not None:
        ax.plot(xs, np.asarray(observed, float), "x", color="k", ms=6, label="observed (held out)")
    return _finish(ax, path, x, bands.data.attrs.get("y", "y"), logy)


def plot_fit(fit, at=None, levels=(0.5, 0.9), ax=None, path=None, x: str | None = None, observed=None,
             extend: float = 10.0, logy: bool = True):
    """The fitted runs, and bands at ``at`` (default: a grid from the smallest run to ``extend`` x the largest)."""
    ax = _axes(ax)
    law = fit.law
    x = x or law.input_names[0]
    if at is None:
        if len(law.inputs) == 1:
            v = fit.runs[x].to_numpy()
            grid = np.geomspace(v.min(), v.max() * extend, 120) if law.inputs[0].scale == "log" else \
                np.linspace(v.min(), v.max() + (v.max() - v.min()), 120)
            at = {x: grid}
        else:
            at = fit.runs[list(law.input_names)]
    bands = fit.predict(at, levels=levels)
    plot_bands(bands, x=x, observed=observed, ax=ax, logy=logy)
    runs = fit.runs
    ax.plot(runs[x], runs["y"], ".", color="C1", ms=5, label=f"fitted runs ({len(runs)})")
    ax.set_title(f"{law.name}: {law.formula}", fontsize=9)
    return _finish(ax, path, fit.columns.get(x, x), fit.columns.get("y", "y"), logy)


def plot_frontier(opt: xr.Dataset, ax=None, path=None, levels=None, show=("N", "D"), data=None):
    """The compute-optimal frontier: median N*(C) and D*(C) with shaded central intervals on log axes.

    ``opt`` is :func:`bayescale.compute_optimal`'s Dataset; ``levels`` picks which of its levels to shade (default all);
    ``data`` (a run table with N and D columns) adds the fitted runs at their compute (:func:`bayescale.decisions.default_cost`).
    Returns the Axes.
    """
    ax = _axes(ax)
    c = opt["budget"].values
    levels = sorted(opt["level"].values.tolist(), reverse=True) if levels is None else sorted(levels, reverse=True)
    unknown = [v for v in levels if not np.isclose(opt["level"].values, v).any()]
    if unknown:
        raise BayescaleError(f"levels {unknown} are not in the result (it has {opt['level'].values.tolist()}); "
                             "pass them to compute_optimal(levels=...)")
    names = {"N": ("N_opt", "C0", "N* (parameters)"), "D": ("D_opt", "C1", "D* (tokens)"),
             "L": ("L_opt", "C2", "L* (loss)")}
    for key in show:
        if key not in names:
            raise BayescaleError(f"show= takes 'N', 'D' and/or 'L', got {key!r}")
        var, color, label = names[key]
        for i, lv in enumerate(levels):
            sel = opt.sel(level=lv, method="nearest")
            ax.fill_between(c, sel[f"{var}_lower"].values, sel[f"{var}_upper"].values, color=color,
                            alpha=0.15 + 0.2 * i / max(len(levels) - 1, 1), lw=0, label=f"{label}: {lv:.0%} interval")
        ax.plot(c, opt[f"{var}_median"].values, color=color, lw=1.8, label=f"{label}: median")
    if data is not None:
        c_runs = default_cost(data["N"], data["D"])
        ax.plot(c_runs, data["N"], ".", color="C0", ms=3, alpha=0.5, label="fitted runs (N)")
        ax.plot(c_runs, data["D"], ".", color="C1", ms=3, alpha=0.5, label="fitted runs (D)")
    ax.set_title(f"compute-optimal allocation ({opt.attrs.get('source', '')}, cost {opt.attrs.get('cost', '')})",
                 fontsize=9)
    return _finish(ax, path, "compute budget C", "N*, D*" if "L" not in show else "optimum", True)
