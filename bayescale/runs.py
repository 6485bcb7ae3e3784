"""Run tables in: read, map columns to a law's inputs, validate, and centre.

A run table is a pandas DataFrame (or a CSV/Parquet path) with one row per training run. The user says which
columns are the law's inputs (``x="N"`` for a one-input law, or ``inputs={"N": "params", "D": "tokens"}``),
which is the outcome (``y="loss"``), and optionally a grouping column (one curve per group) and a per-point
measurement error (``se=`` standard error, or ``lower=``/``upper=`` bounds of a 95% interval).

Every check raises :class:`~bayescale.errors.RunTableError` naming the column, the row and what to do.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayescale.errors import RunTableError, SettingError
from bayescale.laws import FLOP_PER_PARAM_TOKEN, Law, Scales, get_law, list_laws
from bayescale.noise import DEFAULT as DEFAULT_LIKELIHOOD
from bayescale.noise import LOG_SCALE

__all__ = ["RunData", "SIZE_SUFFIXES", "default_cost", "distance_beyond", "fitted_span", "outside", "parse_number", "parse_size", "range_coordinates",
           "prepare_runs", "query_points", "read_runs", "run_size", "scales_for", "simpler_law", "transform_inputs"]

Z95 = 1.959963984540054


def read_runs(runs) -> pd.DataFrame:
    """A DataFrame as is, or read from a ``.csv``/``.tsv``/``.parquet`` path.

    A text file whose header reads as one column holding ``;`` or tabs is read again with that separator (and,
    for ``;``, decimal commas in otherwise non-numeric columns), with a warning saying so: the header makes the
    separator unambiguous, and a value misread that way still fails the column checks of :func:`prepare_runs`.
    """
    if isinstance(runs, pd.DataFrame):
        return runs
    if isinstance(runs, (str, Path)):
        path = Path(runs)
        if not path.exists():
            raise RunTableError(f"run table {str(path)!r} does not exist")
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        sep = "\t" if path.suffix.lower() == ".tsv" else ","
        try:
            df = pd.read_csv(path, sep=sep)
            header = str(df.columns[0]) if df.shape[1] == 1 else ""
            other = max((";", "\t"), key=header.count) if (";" in header or "\t" in header) else None
            if other is not None:
                df = _decimal_commas(pd.read_csv(path, sep=other)) if other == ";" else pd.read_csv(path, sep=other)
        except Exception as exc:  # pandas' own parse errors are cryptic about the file
            raise RunTableError(f"could not read {str(path)!r} as CSV: {exc}") from exc
        if other is not None:
            name = "';'" if other == ";" else "tab"
            warnings.warn(f"{str(path)!r} looks {name}-separated (its header has no ','); read it as such: columns "
                          f"{list(map(str, df.columns))}" + (" (decimal commas read as points)"
                                                             if df.attrs.pop("decimal_commas", False) else ""),
                          UserWarning, stacklevel=2)
        return df
    raise RunTableError(f"runs must be a pandas DataFrame or a path to a CSV/Parquet file, got {type(runs).__name__}")


def _decimal_commas(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns whose every value is a number once a decimal comma is read as a point, converted."""
    for col in df.columns:
        if pd.api.types.is_numeric_dtype(df[col]):
            continue
        text = df[col].astype(str).str.strip()
        if not text.str.contains(",", regex=False).any():
            continue
        conv = pd.to_numeric(text.str.replace(",", ".", regex=False), errors="coerce")
        if conv[df[col].notna()].notna().all():
            df[col] = conv
            df.attrs["decimal_commas"] = True
    return df


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


def simpler_law(law: Law, n: int) -> Law | None:
    """The registered law with ``law``'s inputs that needs at most ``n`` distinct points and has the most
    parameters among those, or None."""
    fits = [o for o in list_laws() if o.input_names == law.input_names and o.needs_points <= n and o.name != law.name]
    return max(fits, key=lambda o: o.needs_points) if fits else None


def _smaller_law(law: Law, n: int) -> str:
    """', or choose ...' naming a registered law with the same inputs that fits in ``n`` points, if any."""
    best = simpler_law(law, n)
    if best is None:
        return ""
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
                 lower: str | None = None, upper: str | None = None, likelihood: str = DEFAULT_LIKELIHOOD) -> RunData:
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
    if likelihood in LOG_SCALE:
        bad = (out["y"] <= 0).to_numpy()
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            bounded = law.y_range[0] >= 0 and law.y_range[1] <= 1 and ((out["y"] >= 0) & (out["y"] <= 1)).all()
            raise RunTableError(f"column {y!r} must be > 0 for multiplicative (log-space) noise ({likelihood!r}); "
                                f"{_row_label(df, pos)} is {_fmt(out['y'].iloc[pos])}. Use "
                                + ("likelihood='beta' (bounded metrics, zeros allowed)" if bounded
                                   else "likelihood='normal' or 'studentt'") + ".")
    if likelihood == "beta":
        bad = ((out["y"] < 0) | (out["y"] > 1)).to_numpy()
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise RunTableError(f"column {y!r} must lie in [0, 1] for likelihood='beta' (a bounded metric such as "
                                f"accuracy); {_row_label(df, pos)} is {_fmt(out['y'].iloc[pos])}. Percentages? "
                                "Divide by 100.")
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
    center, lo, hi, logs = {}, {}, {}, []
    for inp in law.inputs:
        v = frame[inp.name].to_numpy(float)
        v = np.log(v) if inp.scale == "log" else v
        center[inp.name] = float(v.mean())
        lo[inp.name], hi[inp.name] = float(v.min() - v.mean()), float(v.max() - v.mean())
        if inp.scale == "log":
            logs.append(v - v.mean())
    joint = np.mean(logs, axis=0) if len(logs) > 1 else np.full(1, np.nan)
    y = frame["y"].to_numpy(float)
    return Scales(y_min=float(y.min()), y_max=float(y.max()), y_med=float(np.median(np.abs(y))) or 1.0,
                  center=center, lo=lo, hi=hi, joint_lo=float(joint.min()), joint_hi=float(joint.max()))


SIZE_SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_NUMBER = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([KMBGTP]?)$", re.IGNORECASE)


def parse_number(text) -> float:
    """A finite number, written with an optional size suffix: ``"70B"`` -> 7e10, ``"1.4T"``, ``"350M"``, ``"2K"``
    (K, M, B or G, T, P), or plain, ``"7e10"``, ``"-0.5"``."""
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        v = float(text)
    else:
        m = _NUMBER.match(str(text).strip())
        if not m:
            raise SettingError(f"could not read {text!r} as a number: write e.g. 7e10 or 0.5, or a size with a suffix "
                               "K, M, B (or G), T, P such as 70B, 1.4T, 350M")
        v = float(m.group(1)) * SIZE_SUFFIXES[m.group(2).upper()] if m.group(2) else float(m.group(1))
    if not math.isfinite(v):
        raise SettingError(f"{text!r} is not a finite number")
    return v


def parse_size(text) -> float:
    """A positive :func:`parse_number`: ``"70B"`` -> 7e10, ``"1.4T"`` -> 1.4e12, ``"7e10"``."""
    v = parse_number(text)
    if v <= 0:
        raise SettingError(f"size {text!r} must be a positive number, e.g. 70B, 1.4T or 7e10")
    return v


def _points_example(law: Law) -> str:
    sample = {"N": ("70B", "35B"), "D": ("1.4T", "2.8T"), "C": ("1e21", "1e22"), "M": ("20", "80")}
    rows = [",".join(f"{i.name}={sample.get(i.name, ('1e9', '1e10') if i.scale == 'log' else ('2.5', '2'))[r]}"
                     for i in law.inputs) for r in (0, 1)]
    return f"'{rows[0]}' (one point) or '{rows[0]};{rows[1]}' (two)"


def _parse_points(law: Law, text: str, columns: dict | None) -> pd.DataFrame:
    """Points written as rows separated by ';', each ``name=value,...`` or its values alone in input order.

    The older column form, each input once with its values separated by ';' (``N=7e10;1e9,D=1.4e12;2e10``), is
    read too: a ';' inside a comma group that holds the only '=' cannot start a row, because such a row would mix
    unnamed and named values or give too few of them (with one input the two readings agree).
    """
    names = law.input_names

    def fail(why: str):
        return RunTableError(f"could not parse points {text!r}: {why}. Write one point per ';'-separated row, each "
                             f"row name=value,...: e.g. {_points_example(law)}; values may carry a size suffix "
                             "K, M, B (or G), T, P")

    alias = {n: n for n in names} | {c: n for n, c in (columns or {}).items() if n in names}
    body = text.strip().strip(";")  # a stray ';' at either end starts no row
    groups = [g.strip() for g in body.split(",")]
    if ";" in body and all(g.count("=") == 1 and g.split("=")[0].strip() for g in groups):
        cols = {k.strip(): [v.strip() for v in vs.split(";")] for k, vs in (g.split("=") for g in groups)}
        counts = {k: len(v) for k, v in cols.items()}
        if len(cols) < len(groups):
            raise fail("it names an input twice")
        if len(set(counts.values())) > 1:
            raise fail("the inputs have different numbers of values ("
                       + ", ".join(f"{k}: {n}" for k, n in counts.items()) + ")")
        rows = [{k: v[i] for k, v in cols.items()} for i in range(next(iter(counts.values())))]
    else:
        rows = []
        for row in (r.strip() for r in text.split(";")):
            items = [p.strip() for p in row.split(",") if p.strip()]
            if not items:
                continue
            named = ["=" in p for p in items]
            if all(named):
                keys = [p.split("=", 1)[0].strip() for p in items]
                if len(set(keys)) < len(keys):
                    raise fail(f"row {row!r} names an input twice")
                rows.append({k: p.split("=", 1)[1].strip() for k, p in zip(keys, items)})
            elif any(named):
                raise fail(f"row {row!r} mixes named and unnamed values; name all of them or none")
            elif len(items) != len(names):
                raise fail(f"row {row!r} gives {len(items)} value(s) but law {law.name!r} needs {len(names)} values "
                           f"({', '.join(names)}), in that order or named")
            else:
                rows.append(dict(zip(names, items)))
    if not rows:
        raise fail("it gives no point")
    scale = {i.name: i.scale for i in law.inputs}
    out = []
    for row in rows:
        keyed = {alias.get(k, k): v for k, v in row.items()}
        missing, unknown = [n for n in names if n not in keyed], [k for k in row if k not in alias]
        if missing or unknown or len(keyed) < len(row):
            shown = ",".join(f"{k}={v}" for k, v in row.items())
            known = ", ".join(names) + ("" if not columns else " or the fitted columns "
                                        + ", ".join(columns[n] for n in names if n in columns))
            problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
                [f"unknown {', '.join(unknown)}"] if unknown else []) + (
                ["names an input twice"] if len(keyed) < len(row) else [])
            raise fail(f"point {shown!r}: {'; '.join(problems)} (the inputs are {known})")
        point = {}
        for n in names:
            try:
                point[n] = parse_size(keyed[n]) if scale[n] == "log" else parse_number(keyed[n])
            except SettingError as exc:
                why = ("is not a number" if not _NUMBER.match(keyed[n]) else "is not finite" if "finite" in str(exc)
                       else "must be a positive number (a size)")
                raise fail(f"{n}={keyed[n]!r} {why}") from None
        out.append(point)
    return pd.DataFrame(out, columns=list(names))


def _floats(name, values) -> np.ndarray:
    """``values`` as a float array, reading strings with :func:`parse_number`."""
    a = np.atleast_1d(np.asarray(values))
    if a.dtype.kind not in "OUST":
        return a.astype(float)
    try:
        return np.array([parse_number(v) for v in a.ravel()], dtype=float).reshape(a.shape)
    except SettingError as exc:
        raise RunTableError(f"query input {name}: {exc}") from None


def query_points(law: Law, at, columns: dict | None = None) -> pd.DataFrame:
    """Query points as a DataFrame with one column per law input.

    ``at`` may be a DataFrame (law input names or the fitted columns' names), a dict of arrays, a string, or
    (one-input laws) a number or array. A string gives one point per ';'-separated row, each row
    ``name=value,...`` (names of inputs or fitted columns) or its values alone in the law's input order, values
    with an optional size suffix K, M, B (or G), T, P: ``"N=70B,D=1.4T;N=35B,D=2.8T"`` or ``"70B,1.4T;35B,2.8T"``
    are two points. The older column form ``"N=7e10;1e9,D=1.4e12;2e10"`` is still read.
    """
    names = law.input_names
    back = {v: k for k, v in (columns or {}).items() if k in names}
    if isinstance(at, str):
        frame = _parse_points(law, at, columns)
    elif isinstance(at, pd.DataFrame):
        frame = at.rename(columns=back)
    elif isinstance(at, dict):
        values = {back.get(k, k): _floats(k, v) for k, v in at.items()}
        counts = {k: len(v) for k, v in values.items()}
        if len(set(counts.values())) > 1:
            raise RunTableError("query inputs have different numbers of values (" + ", ".join(
                f"{k}: {n}" for k, n in counts.items()) + "); give every input one value per point, e.g. {"
                + ", ".join(f"'{n}': [..., ...]" for n in names) + "}")
        frame = pd.DataFrame(values)
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


def run_size(law: Law, frame: pd.DataFrame) -> np.ndarray:
    """How large each run is, to order them for leave-future-out: the sum of its log-scale inputs (ln units; linear
    inputs as they are)."""
    tot = np.zeros(len(frame))
    for inp in law.inputs:
        v = frame[inp.name].to_numpy(float)
        tot += np.log(v) if inp.scale == "log" else v
    return tot


def default_cost(N, D):
    """Training compute of a run in FLOP, C = 6 N D (N parameters, D tokens): the default cost of runs and
    budgets in :mod:`bayescale.decisions`."""
    return FLOP_PER_PARAM_TOKEN * np.asarray(N, float) * np.asarray(D, float)


def outside(t, lo, hi, scale: str = "log") -> np.ndarray:
    """How far transformed inputs ``t`` lie outside ``[lo, hi]``: decades for a log-scale input (``t`` in ln
    units), units for a linear one; 0 inside. Broadcasts."""
    t, lo, hi = np.asarray(t, float), np.asarray(lo, float), np.asarray(hi, float)
    over = np.maximum(t - hi, 0) + np.maximum(lo - t, 0)
    return over / math.log(10) if scale == "log" else over


def fitted_span(law: Law, scales: Scales) -> float:
    """How much ground the fitted runs cover: max over inputs of their range, in decades (log inputs) or units."""
    return max((scales.hi[i.name] - scales.lo[i.name]) / (math.log(10) if i.scale == "log" else 1.0)
               for i in law.inputs)


def range_coordinates(law: Law, frame, scales: Scales):
    """The coordinates the fitted range is measured in: each input's centred value (ln units for log inputs) and,
    for a law of several log inputs, the mean of those (the log of their geometric mean: a run larger than all the
    fitted ones in N x D lies beyond them even where its N and its D each lie inside their ranges).

    Returns ``t`` (n, K), the runs' ``lo`` and ``hi`` (K,) and each coordinate's scale (``"log"``/``"linear"``)."""
    t = transform_inputs(law, {n: frame[n] for n in law.input_names}, scales.center)
    cols = [np.asarray(t[i.name], float).reshape(-1) for i in law.inputs]
    lo = [float(scales.lo[i.name]) for i in law.inputs]
    hi = [float(scales.hi[i.name]) for i in law.inputs]
    kinds = [i.scale for i in law.inputs]
    logs = [c for c, k in zip(cols, kinds) if k == "log"]
    if len(logs) > 1 and np.isfinite(scales.joint_hi):
        cols.append(np.mean(logs, axis=0))
        lo.append(float(scales.joint_lo)), hi.append(float(scales.joint_hi)), kinds.append("log")
    return np.stack(cols, axis=-1), np.array(lo), np.array(hi), kinds


def distance_beyond(law: Law, frame: pd.DataFrame, scales: Scales) -> np.ndarray:
    """How far each query point lies outside the fitted runs: max over :func:`range_coordinates` of
    :func:`outside` (decades for log inputs)."""
    t, lo, hi, kinds = range_coordinates(law, frame, scales)
    return np.max([outside(t[:, k], lo[k], hi[k], s) for k, s in enumerate(kinds)], axis=0)
