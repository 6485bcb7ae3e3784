"""Bad run tables give a clear RunTableError naming the column/row and what to do; good ones pass through."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.runs import prepare_runs, query_points, read_runs


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


def test_log_scale_noise_needs_positive_y():
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


def test_parse_number_and_size():
    from bayescale.runs import parse_number, parse_size

    assert parse_size("70B") == 70e9 and parse_size("1.4T") == 1.4e12 and parse_size("350m") == 350e6
    assert parse_size("2K") == 2e3 and parse_size("1G") == 1e9 and parse_size("3P") == 3e15 and parse_size(5) == 5.0
    assert parse_number("-0.5") == -0.5 and parse_number("7e10") == 7e10 and parse_number(" 1.5e3K ") == 1.5e6
    for bad, what in (("70X", "as a number"), ("", "as a number"), ("inf", "as a number"), ("1e999", "finite")):
        with pytest.raises(bs.SettingError, match=what):
            parse_number(bad)
    with pytest.raises(bs.SettingError, match="'-5B' must be a positive number"):
        parse_size("-5B")


CHIN_COLS = {"N": "params", "D": "tokens", "y": "loss"}
TWO = [[7e10, 1.4e12], [3.5e10, 2.8e12]]


@pytest.mark.parametrize("text", [
    "N=70B,D=1.4T;N=35B,D=2.8T",           # rows of name=value
    "N=7e10, D=1.4e12 ; D=2.8T, N=35B;",   # any order, spaces, a stray ';'
    "params=70B,tokens=1.4T;params=35B,tokens=2.8T",  # the fitted columns' names
    "70B,1.4T;35B,2.8T",                   # values alone, in the law's input order
    "N=7e10;3.5e10,D=1.4e12;2.8e12",       # the older column form, still read
])
def test_points_syntax(text):
    frame = query_points(bs.get_law("chinchilla"), text, CHIN_COLS)
    assert list(frame.columns) == ["N", "D"] and frame.to_numpy().tolist() == TWO


def test_points_syntax_one_input():
    m2 = bs.get_law("M2")
    for text in ("x=1e9;x=10B", "x=1e9;10B", "1B;1e10"):  # the row and column forms agree with one input
        assert query_points(m2, text)["x"].tolist() == [1e9, 1e10]
    assert query_points(bs.get_law("downstream"), "L=-1;2.5")["L"].tolist() == [-1.0, 2.5]  # a linear input


@pytest.mark.parametrize("text, why", [
    ("N=7e10;1e9,D=1.4e12", r"different numbers of values \(N: 2, D: 1\)"),
    ("N=70B", "missing D"),
    ("N=70B,T=1T", "missing D; unknown T"),
    ("N=70B,D=1.4T,N=1B", "names an input twice"),
    ("N=abc,D=1T", "N='abc' is not a number"),
    ("N=-5B,D=1T", "N='-5B' must be a positive number"),
    ("70B", r"gives 1 value\(s\) but law 'chinchilla' needs 2 values \(N, D\)"),
    ("70B,D=1.4T", "mixes named and unnamed"),
    ("N=7e10;1e9,1.4e12;2e10", "needs 2 values"),  # column form with an unnamed column: not the old form, not rows
    (";", "no point"),
])
def test_points_errors_show_the_syntax(text, why):
    with pytest.raises(bs.RunTableError, match=why) as err:
        query_points(bs.get_law("chinchilla"), text, CHIN_COLS)
    assert "could not parse points" in str(err.value) and "'N=70B,D=1.4T;N=35B,D=2.8T' (two)" in str(err.value)


def test_points_dict_reads_sizes_and_checks_lengths():
    law = bs.get_law("chinchilla")
    assert query_points(law, {"N": ["70B", "35B"], "D": ["1.4T", 2.8e12]}).to_numpy().tolist() == TWO
    with pytest.raises(bs.RunTableError, match=r"different numbers of values \(N: 2, D: 1\).*'N': \[\.\.\., \.\.\.\]"):
        query_points(law, {"N": [1e9, 2e9], "D": [1e11]})
    with pytest.raises(bs.RunTableError, match="query input N.*'7X'"):
        query_points(law, {"N": ["7X"], "D": [1e11]})


def test_targets_and_options_share_the_points_syntax():
    from bayescale.decisions import parse_option, parse_target

    law = bs.get_law("chinchilla")
    kind, frame = parse_target("N=70B,D=1.4T;N=35B,D=2.8T", law)
    assert kind == "points" and frame.to_numpy().tolist() == TWO
    assert parse_target("compute_optimal=1e24", law) == ("compute_optimal", 1e24)
    assert parse_target("compute_optimal=1000000P", law) == ("compute_optimal", 1e21)
    with pytest.raises(bs.BayescaleError, match="bad target: could not parse points.*N=70B,D=1.4T;N=35B"):
        parse_target("N=7e10;1e9,D=1.4e12", law)
    assert parse_option("N=70B,D=1.4T;") == parse_option("70B,1.4T") == dict(N=7e10, D=1.4e12)
    with pytest.raises(bs.BayescaleError, match="gives 2 runs; give one run per option"):
        parse_option("N=70B,D=1.4T;N=35B,D=2.8T")


def test_semicolon_and_tab_separated_files(tmp_path):
    good = runs()
    semi = tmp_path / "semi.csv"
    good.to_csv(semi, sep=";", index=False, decimal=",")  # as a spreadsheet set to a comma decimal writes it
    with pytest.warns(UserWarning, match=r"looks ';'-separated.*\['size', 'loss', 'err'\].*decimal commas"):
        back = read_runs(semi)
    pd.testing.assert_frame_equal(back, good)
    tab = tmp_path / "tab.txt"
    good.to_csv(tab, sep="\t", index=False)
    with pytest.warns(UserWarning, match="looks tab-separated"):
        assert len(prepare_runs(tab, "M2", x="size", y="loss").frame) == 8
    tsv = tmp_path / "runs.tsv"
    good.to_csv(tsv, sep="\t", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pd.testing.assert_frame_equal(read_runs(tsv), good)
        plain = tmp_path / "plain.csv"
        good.to_csv(plain, index=False)
        pd.testing.assert_frame_equal(read_runs(plain), good)
