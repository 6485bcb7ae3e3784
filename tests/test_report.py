"""Risk report: option parsing, probabilities that agree with the draws they summarise, the files written, the page
in a real headless browser, the CLI, bad inputs."""

import base64
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.cli import main
from bayescale.decisions import (RiskReport, SearchOptions, assess_risk, check_in_browser, check_target_loss, chromium,
                                 format_size, parse_option, parse_size, risk_report, write_report)

from conftest import FAST

OPTIONS = ["70B,1.4T", "N=35B,D=2.8T", "1e9,2e10"]


def test_parse_size_and_option():
    assert parse_size("70B") == 70e9 and parse_size("1.4T") == 1.4e12 and parse_size("350M") == 350e6
    assert parse_size("2k") == 2e3 and parse_size("7e10") == 7e10 and parse_size(3) == 3.0
    assert parse_option("70B,1.4T") == {"N": 70e9, "D": 1.4e12}
    assert parse_option("D=1.4T, N=70B") == {"N": 70e9, "D": 1.4e12}
    assert parse_option({"N": "1B", "D": 2e10}) == {"N": 1e9, "D": 2e10}
    assert parse_option("3M", "M2") == {"x": 3e6}
    for bad, what in (("70X,1.4T", "70X"), ("70B", "2 value"), ("70B,1.4T,3", "2 value"), ("N=70B,T=1T", "missing"),
                      ("-5B,1T", "-5B"), ("70B,0", "positive")):
        with pytest.raises(bs.BayescaleError, match=what):
            parse_option(bad)


def test_format_size_and_target_loss():
    assert format_size(7e10) == "70B" and format_size(1.4e12) == "1.4T" and format_size(512) == "512"
    assert all(parse_size(format_size(v)) == v for v in (7e10, 1.4e12, 3.5e8, 2e3))
    assert format_size(9.996e11) == "1T" and format_size(999.6) == "1K"  # rounding reaches the next unit
    assert check_target_loss("2.5") == 2.5
    for bad in (None, "low", float("inf")):
        with pytest.raises(bs.BayescaleError, match="target_loss"):
            check_target_loss(bad)


@pytest.fixture(scope="module")
def kaplan_fit(chinchilla_runs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bs.fit(chinchilla_runs, "kaplan", inputs={"N": "params", "D": "tokens"}, y="loss", seed=0, **FAST)


@pytest.fixture(scope="module")
def report(chinchilla_fit, kaplan_fit, tmp_path_factory):
    # a target near the first option's median, so that P(loss <= target) is neither 0 nor 1
    target = float(np.round(chinchilla_fit.predict({"N": [70e9], "D": [1.4e12]})["run_median"].values[0], 3))
    out = tmp_path_factory.mktemp("report")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = risk_report(fits={"chinchilla": chinchilla_fit, "kaplan": kaplan_fit}, options=OPTIONS,
                          target_loss=target, out=out, seed=0, n_draws=2000,
                          search=SearchOptions(n_outcomes=8, max_draws=300))
    return rep, target, out


def test_probabilities_agree_with_the_draws(report):
    rep, target, _ = report
    s, d = rep.summary, rep.draws
    assert list(d.columns) == OPTIONS and len(d) == s["n_draws"] == 2000
    for lab in OPTIONS:
        x = d[lab].to_numpy()
        o = s["options"][lab]
        assert o["p_meet"] == np.mean(x <= target)
        assert o["expected_shortfall"] == pytest.approx(np.mean(np.maximum(x - target, 0)), rel=1e-12)
        assert o["median"] == pytest.approx(np.median(x), rel=1e-12)
        assert (o["lo80"], o["hi80"]) == pytest.approx(tuple(np.quantile(x, [0.1, 0.9])), rel=1e-12)
        assert (o["lo95"], o["hi95"]) == pytest.approx(tuple(np.quantile(x, [0.025, 0.975])), rel=1e-12)
        assert o["cvar95"] >= o["hi95"] - 1e-12
        for other in OPTIONS:
            if other != lab:
                assert s["p_beats"][lab][other] == np.mean(x < d[other].to_numpy())
                assert s["p_beats"][lab][other] + s["p_beats"][other][lab] == pytest.approx(1.0)
    assert 0 < s["options"][OPTIONS[0]]["p_meet"] < 1
    assert s["options"]["70B,1.4T"]["compute"] == pytest.approx(6 * 70e9 * 1.4e12)
    # the headline is the stacking average; each family is reported on its own as well
    assert set(s["weights"]) == {"chinchilla", "kaplan"} and sum(s["weights"].values()) == pytest.approx(1.0)
    assert {"chinchilla", "kaplan"} <= set(s["families"]) and any(k.startswith("average") for k in s["families"])


def test_gate_and_next_run_are_reported(report, chinchilla_fit, kaplan_fit):
    rep, _, _ = report
    g, w = rep.summary["gate"], rep.summary["weights"]
    bad = [n for n, f in {"chinchilla": chinchilla_fit, "kaplan": kaplan_fit}.items() if not f.ok and w[n] >= 0.01]
    assert g["ok"] == (not bad)
    if bad:
        assert g["text"].startswith("WARNING") and all(f"the {n} fit (weight" in g["text"] for n in bad)
    nxt = rep.summary["next_run"]
    assert nxt["cost"] > 0 and 0 <= nxt["target_sd_after"] and 30 <= nxt["candidates"] <= 36
    assert rep.next_runs is not None and rep.next_runs.iloc[0]["chosen"]


def test_default_candidates_are_new_runs():
    """The grid starts at the smallest pilot run: that run (and any other already trained) is not a candidate."""
    import pandas as pd

    from bayescale.decisions.risk import default_candidates

    runs = pd.DataFrame({"N": [1e7, 1e8, 1e9], "D": [2e8, 2e9, 2e10]})
    cand = default_candidates(runs, bs.get_law("chinchilla"))
    assert len(cand) == 35  # 6 x 6 less the run at the grid's corner
    assert not ((cand["N"] == 1e7) & (cand["D"] == 2e8)).any()


def test_the_verdict_names_failing_fits_by_their_weight():
    from bayescale.decisions.risk import diagnostics_verdict

    gate = {"chinchilla": {"ok": True, "warnings": []}, "kaplan": {"ok": False, "warnings": ["3 divergences"]}}
    unused = diagnostics_verdict(gate, {"chinchilla": 1.0, "kaplan": 0.0})
    assert not unused.startswith("WARNING") and "chinchilla 1.00" in unused and "kaplan fit also failed" in unused
    used = diagnostics_verdict(gate, {"chinchilla": 0.4, "kaplan": 0.6})
    assert used.startswith("WARNING: the kaplan fit (weight 0.60) failed its diagnostics (3 divergences)")


def test_each_option_is_set_against_the_compute_optimal_split(report):
    """Laws in N and D: the report says, at each option's compute, where the compute-optimal N* lies (80%) and
    whether the option's own N is within it, larger or smaller (issue 16: decisions see the allocation)."""
    rep, _, out = report
    al = rep.summary["allocation"]
    assert set(al["options"]) == set(OPTIONS) and "isoFLOP" in al["note"]
    for lab, a in al["options"].items():
        assert a["N_opt_lo80"] < a["N_opt"] < a["N_opt_hi80"]
        inside = a["N_opt_lo80"] <= a["N"] <= a["N_opt_hi80"]
        assert a["verdict"] == ("within it" if inside else "a larger model" if a["N"] > a["N_opt_hi80"]
                                else "a smaller model")
        run = parse_option(lab)
        assert a["N"] == run["N"] and a["tokens_per_param"] == pytest.approx(run["D"] / run["N"])
    # 70B,1.4T and 35B,2.8T spend the same compute, so they share one optimum; 1e9,2e10 spends less
    n_opt = [al["options"][lab]["N_opt"] for lab in OPTIONS]
    assert n_opt[0] == pytest.approx(n_opt[1]) and n_opt[2] < n_opt[0]
    md = (out / "report.md").read_text()
    assert "## Compute-optimal split" in md and "compute-optimal N* (80%)" in md


def test_files_are_self_contained(report):
    rep, target, out = report
    assert json.loads((out / "report.json").read_text())["options"]["70B,1.4T"]["p_meet"] == \
        rep.summary["options"]["70B,1.4T"]["p_meet"]
    md = (out / "report.md").read_text()
    assert "P(meet)" in md and "70B,1.4T" in md and "Next pilot run" in md
    page = (out / "report.html").read_text()
    assert not re.search(r'(src|href)="(https?:)?//', page), "the page must not load external resources"
    imgs = re.findall(r'<img[^>]+src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(imgs) == 3
    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in imgs)
    saved = np.load(out / "report_draws.npz")
    np.testing.assert_array_equal(saved["loss"], rep.draws.to_numpy())


def test_numbers_then_rendering(report, chinchilla_fit, tmp_path):
    """risk_report is assess_risk's numbers rendered by write_report: the same numbers without files, and the
    same files from the numbers alone."""
    rep, target, out = report
    assert isinstance(rep, RiskReport) and rep.input_columns == ["params", "tokens"] and len(rep.families) == 9
    files = write_report(rep, tmp_path / "again")
    assert set(files) == {"html", "md", "json", "draws"}
    for name in ("report.json", "report.md"):
        assert (tmp_path / "again" / name).read_text() == (out / name).read_text()
    one = {"chinchilla": chinchilla_fit}
    small = dict(candidates={"params": [1e9, 4e9], "tokens": [1e11]}, seed=1, n_draws=500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        numbers = assess_risk(one, ["70B,1.4T"], 2.0, search=SearchOptions(n_outcomes=4, max_draws=100), **small)
        whole = risk_report(fits=one, options=["70B,1.4T"], target_loss=2.0,
                            search=SearchOptions(n_outcomes=4, max_draws=100), **small)
    assert numbers.files == whole.files == {} and numbers.summary == whole.summary
    pd.testing.assert_frame_equal(numbers.draws, whole.draws)
    pd.testing.assert_frame_equal(numbers.families, whole.families)


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed (Debian: apt-get install -y chromium; "
                                                 "`make test` tries): the browser check of the report is skipped")
def test_report_in_headless_chromium(report, tmp_path):
    _, _, out = report
    chk = check_in_browser(out / "report.html", screenshot=tmp_path / "shot.png")
    assert chk["checked"], "the page's own check did not run (JavaScript disabled or page not loaded)"
    assert chk["images"] == 3 and chk["images_ok"] == 3 and chk["script_errors"] == 0
    assert chk["img_tags_with_data"] == 3
    assert (tmp_path / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the check can fail: a broken image and a script error are seen as such
    broken = (out / "report.html").read_text().replace("base64,iVBOR", "base64,AAAA", 1)
    broken = broken.replace("</body>", "<script>undefinedFunction();</script></body>")
    (tmp_path / "broken.html").write_text(broken)
    bad = check_in_browser(tmp_path / "broken.html")
    assert bad["images_ok"] == 2 and bad["script_errors"] >= 1


def test_cli_report(chinchilla_runs, tmp_path, capsys):
    path = tmp_path / "runs.csv"
    chinchilla_runs.to_csv(path, index=False)
    args = ["report", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--y", "loss",
            "--option", "70B,1.4T", "--option", "35B,2.8T", "--target-loss", "2.0", "--out", str(tmp_path / "rep"),
            "--chains", "2", "--warmup", "300", "--samples", "300"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "P(loss <= 2)" in text and "report.html" in text
    assert (tmp_path / "rep" / "report.html").exists() and (tmp_path / "rep" / "report.md").exists()
    bad = args[:8] + ["--option", "70 billion,1.4T"] + args[10:]
    assert main(bad) == 2
    assert "70 billion" in capsys.readouterr().err


def test_bad_inputs(chinchilla_fit):
    with pytest.raises(bs.BayescaleError, match="target_loss"):
        risk_report(fits={"c": chinchilla_fit}, options=OPTIONS, target_loss=float("nan"))
    with pytest.raises(bs.BayescaleError, match="options"):
        risk_report(fits={"c": chinchilla_fit}, options=[], target_loss=2.0)
    with pytest.raises(bs.BayescaleError, match="runs"):
        risk_report(options=OPTIONS, target_loss=2.0)
