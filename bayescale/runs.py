"""Run tables in: read, map columns to a law's inputs, validate, and centre.

A run table is a pandas DataFrame (or a CSV/Parquet path) with one row per training run. The user says which
columns are the law's inputs (``x="N"`` for a one-input law, or ``inputs={"N": "params", "D": "tokens"}``),
which is the outcome (``y="loss"``), and optionally a grouping column (one curve per group) and a per-point
measurement error (``se=`` standard error, or ``lower=``/``upper=`` bounds of a 95% interval).

Every check raises :class:`~bayescale.errors.RunTableError` naming the column, the row and what to do.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayescale.errors import RunTableError
from bayescale.laws import Law, Scales, get_law, list_laws

__all__ = ["RunData", "default_cost", "distance_beyond", "outside", "prepare_runs", "query_points", "read_runs", "scales_for", "transform_inputs"]

Z95 = 1.959963984540054


def read_runs(runs) -> pd.DataFrame:
    """A DataFrame as is, or read from a ``.csv``/``.parquet`` path."""
    if isinstance(runs, pd.DataFrame):
        return runs
    if isinstance(runs, (str, Path)):
        path = Path(runs)
        if not path.exists():
            raise RunTableError(f"run table {str(path)!r} does not exist")
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        try:
            return pd.read_csv(path)
        except Exception as exc:  # pandas' own parse errors are cryptic about the file
            raise RunTableError(f"could not read {str(path)!r} as CSV: {exc}") from exc
    raise RunTableError(f"runs must be a pandas DataFrame or a path to a CSV/Parquet file, got {type(runs).__name__}")


@dataclass
class RunData:
    """Validated runs for one law: columns renamed to the law's inputs, ``y``, optional ``se`` and ``group``."""

    law: Law
    frame: pd.DataFrame
    columns: dict  # law name -> user's column name ("y", inputs, "se", "group")
    likelihood: str

    @property
    def groups(self) -> list:
        return list(pd.unique(self.frame["group"])) if "group" in self.frame else [None]

    def curve(self, group=None) -> pd.DataFrame:
        return self.frame if group is None else self.frame[self.frame["group"] == group]


def _fmt(v) -> str:
    try:
        return f"{float(v):g}"
    except (TypeError, ValueError):
        return repr(v)


def _smaller_law(law: Law, n: int) -> str:
    """', or choose ...' naming a registered law with the same inputs that fits in ``n`` points, if any."""
    fits = [o for o in list_laws() if o.input_names == law.input_names and o.needs_points <= n]
    if not fits:
        return ""
    best = max(fits, key=lambda o: o.needs_points)
    return f", or choose a law with fewer parameters (e.g. {best.name}, {best.needs_points} points)"


def _row_label(df: pd.DataFrame, pos: int) -> str:
    return f"row {pos} (index {df.index[pos]!r})"


def _column(df: pd.DataFrame, col: str, role: str) -> pd.Series:
    if col not in df.columns:
        raise RunTableError(
            f"column {col!r} (the {role}) is not in the run table; its columns are {list(map(str, df.columns))}. "
            f"Name the right column, e.g. y='loss' or inputs={{'N': 'params'}}."
        )
    s = pd.to_numeric(df[col], errors="coerce")
    bad = ~np.isfinite(s.to_numpy(dtype=float))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise RunTableError(
            f"column {col!r} (the {role}) has {int(bad.sum())} missing, non-numeric or infinite value(s); "
            f"the first is {_row_label(df, pos)}: {_fmt(df[col].iloc[pos])}. Drop or fix those rows first."
        )
    return s.astype(float)


def _input_map(law: Law, x, inputs) -> dict:
    names = law.input_names
    if inputs is None and x is None:
        raise RunTableError(f"law {law.name!r} needs input column(s) {list(names)}: pass "
                            + ("x='<column>'" if len(names) == 1 else "inputs={" + ", ".join(f"'{n}': '<column>'" for n in names) + "}"))
    if x is not None and inputs is not None:
        raise RunTableError("pass either x= or inputs=, not both")
    if x is not None:
        cols = [x] if isinstance(x, str) else list(x)
        if len(cols) != len(names):
            raise RunTableError(f"law {law.name!r} has inputs {list(names)} but x= names {len(cols)} column(s) {cols}; "
                                "give one column per input, in that order, or use inputs={...}")
        return dict(zip(names, cols))
    mapping = dict(inputs)
    missing, extra = [n for n in names if n not in mapping], [k for k in mapping if k not in names]
    if missing or extra:
        raise RunTableError(f"law {law.name!r} has inputs {list(names)}; inputs= gave {list(mapping)}"
                            + (f" (missing {missing})" if missing else "") + (f" (unknown {extra})" if extra else ""))
    return mapping


def prepare_runs(runs, law, *, y: str, x=None, inputs=None, group: str | None = None, se: str | None = None,
                 lower: str | None = None, upper: str | None = None, likelihood: str = "lognormal") -> RunData:
    """Validate ``runs`` for ``law`` and return them with standard column names.

    Exact duplicate rows are dropped with a warning. Raises :class:`RunTableError` on a missing column, NaN or
    infinite values, a non-positive size for a log-scale input, y outside the law's range, or fewer distinct
    points (per group) than the law needs.
    """
    law = get_law(law)
    df = read_runs(runs)
    if len(df) == 0:
        raise RunTableError("the run table is empty")
    mapping = _input_map(law, x, inputs)
    out = pd.DataFrame(index=df.index)
    for inp in law.inputs:
        col = mapping[inp.name]
        vals = _column(df, col, f"input {inp.name}")
        if inp.scale == "log":
            bad = (vals <= 0).to_numpy()
            if bad.any():
                pos = int(np.flatnonzero(bad)[0])
                raise RunTableError(f"column {col!r} (input {inp.name}) must be > 0 (it enters the law on a log scale); "
                                    f"{_row_label(df, pos)} is {_fmt(vals.iloc[pos])}. Remove non-positive sizes.")
        out[inp.name] = vals
    out["y"] = _column(df, y, "outcome y")
    lo_y, hi_y = law.y_range
    bad = ((out["y"] < lo_y) | (out["y"] > hi_y)).to_numpy()
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise RunTableError(f"column {y!r} must lie in [{lo_y}, {hi_y}] for law {law.name!r}; {_row_label(df, pos)} "
                            f"is {_fmt(out['y'].iloc[pos])}. Is this the right law (or metric: error vs accuracy)?")
    if likelihood == "lognormal":
        bad = (out["y"] <= 0).to_numpy()
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise RunTableError(f"column {y!r} must be > 0 for the default multiplicative (log-space) noise; "
                                f"{_row_label(df, pos)} is {_fmt(out['y'].iloc[pos])}. Use likelihood='normal' or 'studentt'.")
    columns = {**mapping, "y": y}
    if se is not None and (lower is not None or upper is not None):
        raise RunTableError("give either se= or lower=/upper=, not both")
    if se is not None:
        out["se"] = _column(df, se, "standard error")
        columns["se"] = se
    elif lower is not None or upper is not None:
        if lower is None or upper is None:
            raise RunTableError("lower= and upper= go together (the bounds of a 95% interval)")
        lo_c, hi_c = _column(df, lower, "lower bound"), _column(df, upper, "upper bound")
        out["se"] = (hi_c - lo_c) / (2 * Z95)
        columns["lower"], columns["upper"] = lower, upper
    if "se" in out:
        bad = (out["se"] < 0).to_numpy()
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise RunTableError(f"measurement error must be >= 0; {_row_label(df, pos)} gives {_fmt(out['se'].iloc[pos])} "
                                "(are lower/upper swapped?)")
    if group is not None:
        if group not in df.columns:
            raise RunTableError(f"group column {group!r} is not in the run table; its columns are {list(map(str, df.columns))}")
        if df[group].isna().any():
            pos = int(np.flatnonzero(df[group].isna().to_numpy())[0])
            raise RunTableError(f"group column {group!r} is missing in {_row_label(df, pos)}; fill or drop it")
        out["group"] = df[group].to_numpy()
        columns["group"] = group

    dup = out.duplicated()
    if dup.any():
        warnings.warn(f"dropped {int(dup.sum())} exact duplicate run(s) (first: {_row_label(out, int(np.flatnonzero(dup)[0]))})",
                      UserWarning, stacklevel=2)
        out = out[~dup]

    keys = ["group"] if "group" in out else []
    for g, sub in (out.groupby(keys, sort=False) if keys else [(None, out)]):
        n = len(sub.drop_duplicates(subset=list(law.input_names)))
        if n < law.needs_points:
            where = f" in group {g[0]!r}" if keys else ""
            why = (f"has {len(law.params)} parameters plus a noise scale and " if law.min_points is None else "")
            raise RunTableError(f"law {law.name!r} {why}needs at least {law.needs_points} distinct points; got "
                                f"{n}{where}. Add runs{_smaller_law(law, n)}.")
    return RunData(law=law, frame=out, columns=columns, likelihood=likelihood)


def transform_inputs(law: Law, values: dict, center: dict) -> dict:
    """Centred inputs t: ln(x) - ln(x0) for log inputs, x - x0 for linear ones."""
    t = {}
    for inp in law.inputs:
        v = np.asarray(values[inp.name], dtype=float)
        t[inp.name] = (np.log(v) if inp.scale == "log" else v) - center[inp.name]
    return t


def scales_for(law: Law, frame: pd.DataFrame) -> Scales:
    """Centre and ranges of each input, and y summaries, for one curve's runs."""
    center, lo, hi = {}, {}, {}
    for inp in law.inputs:
        v = frame[inp.name].to_numpy(float)
        v = np.log(v) if inp.scale == "log" else v
        center[inp.name] = float(v.mean())
        lo[inp.name], hi[inp.name] = float(v.min() - v.mean()), float(v.max() - v.mean())
    y = frame["y"].to_numpy(float)
    return Scales(y_min=float(y.min()), y_max=float(y.max()), y_med=float(np.median(np.abs(y))) or 1.0,
                  center=center, lo=lo, hi=hi)


def query_points(law: Law, at, columns: dict | None = None) -> pd.DataFrame:
    """Query points as a DataFrame with one column per law input.

    ``at`` may be a DataFrame (law input names or the fitted columns' names), a dict of arrays, a string like
    ``"N=7e10,D=1.4e12"``, or (one-input laws) a number or array.
    """
    names = law.input_names
    back = {v: k for k, v in (columns or {}).items() if k in names}
    if isinstance(at, str):
        try:
            at = {k.strip(): [float(v) for v in vs.split(";")] for k, vs in (kv.split("=") for kv in at.split(","))}
        except ValueError:
            raise RunTableError(f"could not parse query {at!r}; write it as 'N=7e10,D=1.4e12' (';' separates several values)") from None
    if isinstance(at, pd.DataFrame):
        frame = at.rename(columns=back)
    elif isinstance(at, dict):
        frame = pd.DataFrame({back.get(k, k): np.atleast_1d(np.asarray(v, dtype=float)) for k, v in at.items()})
    else:
        if len(names) != 1:
            raise RunTableError(f"law {law.name!r} has inputs {list(names)}: pass at= as a dict or DataFrame with those keys")
        frame = pd.DataFrame({names[0]: np.atleast_1d(np.asarray(at, dtype=float))})
    missing = [n for n in names if n not in frame.columns]
    if missing:
        raise RunTableError(f"query points lack input(s) {missing} of law {law.name!r}; give {list(names)}")
    frame = frame[list(names)].astype(float).reset_index(drop=True)
    for inp in law.inputs:
        v = frame[inp.name].to_numpy()
        if not np.all(np.isfinite(v)):
            raise RunTableError(f"query input {inp.name} has NaN or infinite values")
        if inp.scale == "log" and np.any(v <= 0):
            raise RunTableError(f"query input {inp.name} must be > 0; got {_fmt(v[v <= 0][0])}")
    return frame


def default_cost(N, D):
    """Training compute of a run in FLOP, C = 6 N D (N parameters, D tokens): the default cost of runs and
    budgets in :mod:`bayescale.decisions`."""
    return 6.0 * np.asarray(N, float) * np.asarray(D, float)


def outside(t, lo, hi, scale: str = "log") -> np.ndarray:
    """How far transformed inputs ``t`` lie outside ``[lo, hi]``: decades for a log-scale input (``t`` in ln
    units), units for a linear one; 0 inside. Broadcasts."""
    t, lo, hi = np.asarray(t, float), np.asarray(lo, float), np.asarray(hi, float)
    over = np.maximum(t - hi, 0) + np.maximum(lo - t, 0)
    return over / math.log(10) if scale == "log" else over


def distance_beyond(law: Law, frame: pd.DataFrame, scales: Scales) -> np.ndarray:
    """How far each query point lies outside the fitted range: max over inputs of :func:`outside`."""
    t = transform_inputs(law, {n: frame[n] for n in law.input_names}, scales.center)
    d = np.zeros(len(frame))
    for inp in law.inputs:
        d = np.maximum(d, outside(t[inp.name], scales.lo[inp.name], scales.hi[inp.name], inp.scale))
    return d
