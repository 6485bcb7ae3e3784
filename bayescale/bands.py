"""Posterior predictive bands: the one result type of every route (NUTS fit, model average, PFN).

:class:`Bands` wraps an ``xarray.Dataset`` with dimensions ``point`` (the query points, with one coordinate per
law input) and ``level`` (central interval probabilities):

- ``curve_median``, ``curve_mean``, ``curve_lower``, ``curve_upper``: the law's mean curve (parameter uncertainty);
- ``run_median``, ``run_mean``, ``run_lower``, ``run_upper``: a new observed run there (plus run-to-run noise);
- ``extrapolation`` (bool) and ``beyond``: how far the point lies outside the fitted runs, in decades of the
  furthest log-scale input (units for linear ones), 0 inside.

Attributes name the law, the method and the outcome column. Item access, ``sel``, ``to_dataframe`` and
``to_netcdf`` go to the Dataset; :meth:`Bands.plot` and :meth:`Bands.table` are bayescale's.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr

from bayescale.errors import SettingError
from bayescale.posterior import PosteriorDraws

__all__ = ["DEFAULT_LEVELS", "Bands", "bands_from_draws", "check_levels", "interval_probs", "make_bands",
           "make_bands_from_quantiles", "summarize_draws"]

DEFAULT_LEVELS = (0.5, 0.8, 0.9, 0.95)


FAR_DECADES = 4.0  # a query this many decades beyond the runs gets a warning with its bands


def _beyond(frame: pd.DataFrame, beyond) -> np.ndarray:
    """The points' distance beyond the runs (0 when not given); a warning names the furthest point past
    :data:`FAR_DECADES`."""
    b = np.zeros(len(frame)) if beyond is None else np.asarray(beyond, float)
    if len(b) and b.max() > FAR_DECADES:
        i = int(np.argmax(b))
        warnings.warn(f"{int((b > FAR_DECADES).sum())} query point(s) lie more than {FAR_DECADES:g} decades beyond the "
                      f"fitted runs (furthest: {frame.iloc[i].to_dict()}, {b[i]:.1f} decades): no run checks the law "
                      "that far, so the bands there show the law's form more than the data. Is the unit right "
                      "(e.g. parameters, not billions)?", UserWarning, stacklevel=3)
    return b


def check_levels(levels) -> list[float]:
    """Central-interval probabilities, sorted, each strictly in (0, 1) and distinct; a clear error otherwise."""
    try:
        out = sorted(float(v) for v in np.atleast_1d(np.asarray(levels, dtype=float)))
    except (TypeError, ValueError):
        raise SettingError(f"levels must be numbers strictly between 0 and 1 (e.g. 0.5, 0.9), got {levels!r}") from None
    if not out or any(not 0 < v < 1 for v in out):
        raise SettingError(f"levels must lie strictly between 0 and 1, got {out}")
    if len(set(out)) < len(out):
        raise SettingError(f"levels must be distinct, got {out}")
    return out


def interval_probs(levels) -> tuple[list[float], list[float]]:
    """The probabilities of the central intervals' ends: ``(1 - level) / 2`` (lower) and ``(1 + level) / 2``."""
    return [(1 - v) / 2 for v in levels], [(1 + v) / 2 for v in levels]


def summarize_draws(ds: xr.Dataset, name: str, draws: np.ndarray, levels: list[float], dim: str) -> None:
    """Add ``{name}_median``, ``_mean`` (dim) and central intervals ``_lower``/``_upper`` (level, dim) of
    ``draws`` (S, n) to ``ds``."""
    ds[f"{name}_median"] = (dim, np.median(draws, axis=0))
    ds[f"{name}_mean"] = (dim, draws.mean(axis=0))
    lower, upper = interval_probs(levels)
    ds[f"{name}_lower"] = (("level", dim), np.quantile(draws, lower, axis=0))
    ds[f"{name}_upper"] = (("level", dim), np.quantile(draws, upper, axis=0))


class Bands:
    """Posterior predictive bands (see the module docstring); ``.data`` is the xarray Dataset."""

    def __init__(self, data: xr.Dataset):
        self.data = data

    def __getitem__(self, key):
        return self.data[key]

    def __getattr__(self, name):
        if name == "data":
            raise AttributeError(name)
        return getattr(self.data, name)

    def __repr__(self) -> str:
        return f"<bayescale.Bands law={self.data.attrs.get('law')} method={self.data.attrs.get('method')}>\n{self.data!r}"

    @property
    def levels(self) -> list[float]:
        return [float(v) for v in self.data["level"].values]

    @property
    def inputs(self) -> list[str]:
        return list(self.data.attrs["inputs"].split(","))

    def interval(self, level: float, kind: str = "run"):
        """(lower, upper) arrays of the central ``level`` interval; ``kind`` is ``"run"`` or ``"curve"``."""
        d = self.data.sel(level=level)
        return d[f"{kind}_lower"].values, d[f"{kind}_upper"].values

    def covers(self, observed, level: float, kind: str = "run") -> np.ndarray:
        """Whether each observed value lies inside the central ``level`` interval."""
        lo, hi = self.interval(level, kind)
        obs = np.asarray(observed, float)
        return (obs >= lo) & (obs <= hi)

    def table(self, observed=None, levels=None, kind: str = "run") -> pd.DataFrame:
        """One row per point: inputs, median, interval bounds per level, and (given ``observed``) inside?"""
        levels = self.levels if levels is None else list(levels)
        out = pd.DataFrame({k: self.data[k].values for k in self.inputs})
        out["median"] = self.data[f"{kind}_median"].values
        for lv in levels:
            lo, hi = self.interval(lv, kind)
            out[f"lo{round(lv * 100)}"], out[f"hi{round(lv * 100)}"] = lo, hi
        if observed is not None:
            out["observed"] = np.asarray(observed, float)
            for lv in levels:
                out[f"in{round(lv * 100)}"] = self.covers(observed, lv, kind)
        out["beyond"] = self.data["beyond"].values
        return out

    def to_json(self) -> dict:
        t = self.table()
        return {"attrs": {k: (v if isinstance(v, (str, int, float)) else str(v)) for k, v in self.data.attrs.items()},
                "levels": self.levels, "points": t.to_dict(orient="records")}

    def plot(self, x: str | None = None, observed=None, ax=None, path=None, **kw):
        """Median and shaded run bands against input ``x`` on log axes (see :func:`bayescale.plots.plot_bands`)."""
        from bayescale.plots import plot_bands  # defers matplotlib to the first plot

        return plot_bands(self, x=x, observed=observed, ax=ax, path=path, **kw)


def make_bands(frame: pd.DataFrame, mu: np.ndarray, obs: np.ndarray, levels, *, beyond=None, law: str = "",
               method: str = "", y: str = "y", columns: dict | None = None) -> Bands:
    """Summarise draws (S, points) of the mean curve ``mu`` and of new runs ``obs`` into :class:`Bands`."""
    levels = check_levels(levels)
    for name, arr in (("mean curve", mu), ("new run", obs)):
        bad = ~np.isfinite(arr).all(axis=0)
        if bad.any():
            raise FloatingPointError(
                f"the {name} draws are NaN/inf at {int(bad.sum())} query point(s) (first: {frame.iloc[int(np.flatnonzero(bad)[0])].to_dict()}); "
                "the law is undefined there (e.g. outside its input range)")
    coords = {"point": np.arange(len(frame)), "level": levels, **{k: ("point", frame[k].to_numpy()) for k in frame.columns}}
    ds = xr.Dataset(coords=coords)
    for kind, draws in (("curve", mu), ("run", obs)):
        summarize_draws(ds, kind, draws, levels, "point")
    beyond = _beyond(frame, beyond)
    ds["beyond"] = ("point", beyond)
    ds["extrapolation"] = ("point", beyond > 0)
    ds.attrs.update(law=law, method=method, y=y, inputs=",".join(frame.columns), n_draws=int(mu.shape[0]))
    if columns:
        ds.attrs["columns"] = ",".join(f"{k}={v}" for k, v in columns.items())
    return Bands(ds)


def make_bands_from_quantiles(frame: pd.DataFrame, median, mean, lower, upper, levels, *, beyond=None, law: str = "",
                              method: str = "", y: str = "y", columns: dict | None = None,
                              curve_note: str = "") -> Bands:
    """:class:`Bands` from a predictive given as quantiles (e.g. the PFN) rather than draws.

    ``median``, ``mean`` (points,) and ``lower``, ``upper`` (levels, points) are those of a new observed run, in
    the order of ``levels``. A quantile-only predictive has no separate mean-curve distribution, so ``curve_*``
    repeat ``run_*``; ``curve_note`` (stored in the attrs) should say so.
    """
    levels = [float(lv) for lv in levels]
    check_levels(levels)
    order = np.argsort(levels)
    lower, upper = np.asarray(lower, float)[order], np.asarray(upper, float)[order]
    coords = {"point": np.arange(len(frame)), "level": sorted(levels),
              **{k: ("point", frame[k].to_numpy()) for k in frame.columns}}
    ds = xr.Dataset(coords=coords)
    for kind in ("curve", "run"):
        ds[f"{kind}_median"] = ("point", np.asarray(median, float))
        ds[f"{kind}_mean"] = ("point", np.asarray(mean, float))
        ds[f"{kind}_lower"] = (("level", "point"), lower)
        ds[f"{kind}_upper"] = (("level", "point"), upper)
    beyond = _beyond(frame, beyond)
    ds["beyond"] = ("point", beyond)
    ds["extrapolation"] = ("point", beyond > 0)
    ds.attrs.update(law=law, method=method, y=y, inputs=",".join(frame.columns), n_draws=0)
    if curve_note:
        ds.attrs["curve_note"] = curve_note
    if columns:
        ds.attrs["columns"] = ",".join(f"{k}={v}" for k, v in columns.items())
    return Bands(ds)


def bands_from_draws(draws: PosteriorDraws, frame: pd.DataFrame, levels=DEFAULT_LEVELS, seed: int = 0, *,
                     method: str, columns: dict | None = None, law: str | None = None) -> Bands:
    """:class:`Bands` of :class:`~bayescale.posterior.PosteriorDraws` at the query points ``frame`` (law input
    columns): the curve with its extrapolation error and new runs (:meth:`PosteriorDraws.predictive`). The attrs
    record the extrapolation error used (``discrepancy_tau``: median ln-units per decade beyond the runs, per law
    when the draws mix several; ``extrapolation_error``: how it was obtained)."""
    mu, obs = draws.predictive(frame, seed)
    out = make_bands(frame, mu, obs, levels, beyond=draws.beyond(frame), law=law or draws.source, method=method,
                     y=(columns or {}).get("y", "y"), columns=columns)
    taus = draws.taus
    out.data.attrs["discrepancy_tau"] = (next(iter(taus.values())) if len(taus) == 1
                                         else ",".join(f"{k}:{v:g}" for k, v in taus.items()))
    notes = draws.error_notes
    out.data.attrs["extrapolation_error"] = (next(iter(notes.values())) if len(notes) == 1
                                             else "; ".join(f"{k}: {v}" for k, v in notes.items()))
    return out
