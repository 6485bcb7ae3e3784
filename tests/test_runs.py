"""Bad run tables give a clear RunTableError naming the column/row and what to do; good ones pass through."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.runs import prepare_runs, query_points


def runs(n=8):
    x = np.geomspace(1e6, 1e8, n)
    return pd.DataFrame({"size": x, "loss": 2 + 5 * x**-0.2, "err": np.linspace(0.9, 0.5, n)})


BAD = {
    "missing column": (lambda d: d, dict(x="params"), r"column 'params' .*not in the run table.*size"),
    "NaN": (lambda d: d.assign(loss=d["loss"].where(d.index != 3)), dict(x="size"), r"'loss'.*row 3"),
    "inf": (lambda d: d.assign(size=d["size"].replace(d["size"].iloc[2], np.inf)), dict(x="size"), r"'size'.*row 2"),
    "text": (lambda d: d.assign(loss=d["loss"].astype(object).where(d.index != 1, "n/a")), dict(x="size"), r"row 1.*'n/a'"),
    "zero size": (lambda d: d.assign(size=d["size"].where(d.index != 4, 0.0)), dict(x="size"), r"'size'.*> 0.*row 4"),
    "negative size": (lambda d: d.assign(size=-d["size"]), dict(x="size"), r"must be > 0"),
    "too few points": (lambda d: d.head(3), dict(x="size"), r"needs at least 4 distinct points; got 3"),
    "empty": (lambda d: d.head(0), dict(x="size"), r"empty"),
    "no inputs named": (lambda d: d, dict(), r"pass x='<column>'"),
    "wrong input names": (lambda d: d, dict(inputs={"N": "size"}), r"inputs \['x'\].*unknown \['N'\]"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_gives_clear_error(case):
    edit, kw, pattern = BAD[case]
    with pytest.raises(bs.RunTableError, match=pattern):
        prepare_runs(edit(runs()), "M2", y="loss", **kw)


def test_error_rate_outside_law_range():
    d = runs().assign(err=lambda d: d["err"] * 2)  # 1.8 is not an error rate
    with pytest.raises(bs.RunTableError, match=r"\[0.0, 1.0\].*row 0"):
        prepare_runs(d.rename(columns={"size": "C"}), "sigmoid", x="C", y="err")


def test_lognormal_noise_needs_positive_y():
    d = runs().assign(loss=lambda d: d["loss"].where(d.index != 5, 0.0))
    with pytest.raises(bs.RunTableError, match="row 5.*likelihood='normal'"):
        prepare_runs(d, "M1", x="size", y="loss")
    assert len(prepare_runs(d, "M1", x="size", y="loss", likelihood="normal").frame) == 8


def test_duplicates_warn_and_drop():
    d = pd.concat([runs(), runs().head(2)], ignore_index=True)
    with pytest.warns(UserWarning, match="dropped 2 exact duplicate"):
        rd = prepare_runs(d, "M2", x="size", y="loss")
    assert len(rd.frame) == 8


def test_measurement_error_columns():
    d = runs().assign(lo=lambda d: d["loss"] - 0.0392, hi=lambda d: d["loss"] + 0.0392)
    rd = prepare_runs(d, "M2", x="size", y="loss", lower="lo", upper="hi")
    np.testing.assert_allclose(rd.frame["se"], 0.0392 / 1.959963984540054)
    with pytest.raises(bs.RunTableError, match="lower/upper swapped"):
        prepare_runs(d, "M2", x="size", y="loss", lower="hi", upper="lo")
    with pytest.raises(bs.RunTableError, match="either se= or lower=/upper="):
        prepare_runs(d, "M2", x="size", y="loss", se="lo", lower="lo", upper="hi")


def test_group_checks_points_per_group():
    d = pd.concat([runs().assign(g="a"), runs().head(3).assign(g="b")], ignore_index=True)
    with pytest.raises(bs.RunTableError, match="in group 'b'"):
        prepare_runs(d, "M2", x="size", y="loss", group="g")
    with pytest.raises(bs.RunTableError, match="group column 'grp'"):
        prepare_runs(d, "M2", x="size", y="loss", group="grp")


def test_reads_csv_and_reports_missing_file(tmp_path):
    p = tmp_path / "runs.csv"
    runs().to_csv(p, index=False)
    assert len(prepare_runs(p, "M2", x="size", y="loss").frame) == 8
    with pytest.raises(bs.RunTableError, match="does not exist"):
        prepare_runs(tmp_path / "nope.csv", "M2", x="size", y="loss")


def test_unknown_law():
    with pytest.raises(bs.UnknownLawError, match="Registered laws"):
        prepare_runs(runs(), "M9", x="size", y="loss")


def test_query_points_forms():
    law = bs.get_law("chinchilla")
    cols = {"N": "params", "D": "tokens", "y": "loss"}
    a = query_points(law, "N=7e10,D=1.4e12", cols)
    b = query_points(law, {"params": [7e10], "tokens": [1.4e12]}, cols)
    c = query_points(law, pd.DataFrame({"N": [7e10], "D": [1.4e12]}), cols)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)
    with pytest.raises(bs.RunTableError, match=r"lack input\(s\) \['D'\]"):
        query_points(law, {"N": [1.0]}, cols)
    with pytest.raises(bs.RunTableError, match="must be > 0"):
        query_points(law, {"N": [-1.0], "D": [1.0]}, cols)
    with pytest.raises(bs.RunTableError, match="could not parse"):
        query_points(law, "N=abc", cols)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(query_points(bs.get_law("M2"), [1e6, 1e7])) == 2
