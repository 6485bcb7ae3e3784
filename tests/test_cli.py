"""The command line: happy path (laws, fit, predict, compare) and error path (exit 2 with a readable message)."""

import json
import subprocess
import sys

import pytest

from bayescale.cli import main

FAST = ["--chains", "2", "--warmup", "200", "--samples", "200", "--quiet"]


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory, chinchilla_runs):
    p = tmp_path_factory.mktemp("cli") / "runs.csv"
    chinchilla_runs.to_csv(p, index=False)
    return p


def test_laws_lists_every_family(capsys):
    assert main(["laws", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {"M1", "M4", "BNSL2", "chinchilla", "kaplan", "overtrain", "downstream", "sigmoid"} <= {r["name"] for r in rows}
    import bayescale as bs

    assert all(r["target_accept"] == bs.get_law(r["name"]).target_accept for r in rows)


def test_fit_then_predict(runs_csv, tmp_path, capsys):
    out = tmp_path / "fit.nc"
    assert main(["fit", str(runs_csv), "--law", "chinchilla", "--x", "N=params,D=tokens", "--y", "loss",
                 "--out", str(out), "--target-accept", "0.85", *FAST]) == 0
    text = capsys.readouterr().out
    assert "diagnostics: max r-hat" in text and "alpha (published form)" in text and out.exists()
    import bayescale as bs

    assert bs.load_fit(out).settings.target_accept == 0.85
    assert main(["predict", str(out), "--at", "N=7e10;1e9,D=1.4e12;2e10", "--levels", "0.5,0.9", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["levels"] == [0.5, 0.9] and len(res["points"]) == 2
    p = res["points"][0]
    assert p["lo90"] <= p["lo50"] <= p["median"] <= p["hi50"] <= p["hi90"]
    assert main(["predict", str(out), "--at", "N=7e10,D=1.4e12"]) == 0
    printed = capsys.readouterr().out
    assert "median" in printed and "beyond: decades past the fitted runs" in printed   # the column explained
    # --local: refitted around the query point, the fitted runs discounted by their distance: a wider band there
    assert main(["predict", str(out), "--at", "N=7e10,D=1.4e12", "--levels", "0.9", "--json", "--local", "0.1"]) == 0
    loc = json.loads(capsys.readouterr().out)["points"][0]
    assert main(["predict", str(out), "--at", "N=7e10,D=1.4e12", "--levels", "0.9", "--json"]) == 0
    glob = json.loads(capsys.readouterr().out)["points"][0]
    assert loc["hi90"] - loc["lo90"] > glob["hi90"] - glob["lo90"]
    assert main(["predict", str(out), "--at", "N=7e10,D=1.4e12", "--local", "-0.1"]) == 2
    assert "--local" in capsys.readouterr().err


def test_compare(runs_csv, capsys):
    assert main(["compare", str(runs_csv), "--laws", "chinchilla,kaplan", "--x", "N=params,D=tokens", "--json",
                 *FAST]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 and abs(sum(r["weight"] for r in rows) - 1) < 1e-6


@pytest.mark.parametrize("args, message", [
    (["fit", "{runs}", "--law", "chinchila", "--x", "N=params,D=tokens"], "unknown law 'chinchila'"),
    (["fit", "{runs}", "--law", "chinchilla", "--x", "N=params,D=tok"], "column 'tok'"),
    (["fit", "{runs}", "--law", "chinchilla", "--x", "params"], "has inputs ['N', 'D']"),
    (["fit", "missing.csv", "--law", "M2", "--x", "x"], "does not exist"),
    (["predict", "missing.nc", "--at", "x=1"], "does not exist"),
])
def test_errors_exit_2_with_message(args, message, runs_csv, capsys):
    args = [a.replace("{runs}", str(runs_csv)) for a in args]
    assert main([*args, *FAST] if args[0] == "fit" else args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_console_script_runs():
    exe = [sys.executable, "-m", "bayescale.cli", "laws"]
    res = subprocess.run(exe, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "chinchilla" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "bayescale.cli", "fit", "nope.csv", "--law", "M2", "--x", "x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "error:" in bad.stderr


def test_fit_with_one_chain(tmp_path, capsys):
    """r-hat is not available with one chain: the fit says so instead of failing."""
    import numpy as np
    import pandas as pd

    x = np.geomspace(1, 1e3, 10)
    y = (2 + x**-0.5) * np.exp(np.random.default_rng(1).normal(0, 0.01, x.size))
    runs = tmp_path / "runs.csv"
    pd.DataFrame({"x": x, "y": y}).to_csv(runs, index=False)
    args = ["fit", str(runs), "--law", "M2", "--x", "x", "--y", "y", "--chains", "1", "--warmup", "200",
            "--samples", "200", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "one.nc")]) == 0
    text = capsys.readouterr().out
    assert "max r-hat n/a (one chain)" in text and "warning: r-hat is not available with one chain" in text
    assert main([*args, "--json"]) == 0
    res = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} is not valid JSON"))["None"]
    assert res["max_rhat"] is None and any("one chain" in w for w in res["warnings"])
    assert main(["predict", str(tmp_path / "one.nc"), "--at", "x=1e4"]) == 0


def test_predict_refuses_a_changed_fit_file(chinchilla_fit, tmp_path, capsys):
    import xarray as xr

    tree = xr.open_datatree(chinchilla_fit.save(tmp_path / "fit.nc"), engine="h5netcdf").load()
    post = tree["posterior"].to_dataset()
    tree["posterior"] = post.assign(E=post["E"] - 0.1)
    tree.to_netcdf(tmp_path / "edited.nc", engine="h5netcdf")
    assert main(["predict", str(tmp_path / "edited.nc"), "--at", "N=7e10,D=1.4e12"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "edited.nc" in err and "changed after it was saved" in err


# --- the user's path: one points syntax, ';'-separated files, readable compare, saved fits, laws, report --out


@pytest.fixture(scope="module")
def fit_files(chinchilla_fit, chinchilla_runs, tmp_path_factory):
    """Saved chinchilla and kaplan fits of the same runs (as `bayescale fit --out` writes them)."""
    import bayescale as bs

    d = tmp_path_factory.mktemp("fits")
    kaplan = bs.fit(chinchilla_runs, "kaplan", inputs={"N": "params", "D": "tokens"}, y="loss", seed=0, chains=2,
                    warmup=200, samples=200, progress=False)
    return chinchilla_fit.save(d / "chinchilla.nc"), kaplan.save(d / "kaplan.nc")


def test_predict_points_rows_with_sizes(fit_files, capsys):
    fit = str(fit_files[0])
    assert main(["predict", fit, "--at", "N=70B,D=1.4T;N=35B,D=2.8T", "--levels", "0.9", "--json"]) == 0
    pts = json.loads(capsys.readouterr().out)["points"]
    assert [(p["N"], p["D"]) for p in pts] == [(7e10, 1.4e12), (3.5e10, 2.8e12)]
    assert main(["predict", fit, "--at", "params=70B,tokens=1.4T", "--json"]) == 0  # the fitted columns' names
    assert len(json.loads(capsys.readouterr().out)["points"]) == 1
    for bad, why in (("N=7e10;1e9,D=1.4e12", "different numbers of values"), ("N=70B,T=1T", "unknown T"),
                     ("N=7x,D=1T", "N='7x' is not a number")):
        assert main(["predict", fit, "--at", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and why in err and "'N=70B,D=1.4T;N=35B,D=2.8T' (two)" in err
        assert len(err.strip().splitlines()) == 1


def test_semicolon_separated_file_is_read_with_a_warning(chinchilla_runs, tmp_path, capsys):
    semi = tmp_path / "semi.csv"
    chinchilla_runs.to_csv(semi, sep=";", index=False)
    # a wrong column name stops before fitting: the error lists the columns as read
    assert main(["fit", str(semi), "--law", "chinchilla", "--x", "N=params,D=tok", *FAST]) == 2
    err = capsys.readouterr().err
    assert "warning: " in err and "looks ';'-separated" in err and "['params', 'tokens', 'loss']" in err
    assert "params;tokens;loss" not in err and "Warning" not in err  # one line, no Python warning header


def test_compare_prints_a_readable_table(runs_csv, capsys):
    assert main(["compare", str(runs_csv), "--laws", "chinchilla,kaplan", "--x", "N=params,D=tokens", *FAST]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["family", "weight", "elpd", "(se)", "vs", "best", "(se)", "fit", "max", "r-hat",
                                "divergences"]
    assert lines[1].startswith("chinchilla") and "best" in lines[1] and lines[2].startswith("kaplan")
    assert lines[3].startswith("weight: share in the stacking average")
    assert not any(raw in out for raw in ("elpd_diff", "dse", "p_worse", "diag_"))
    assert sum("Pareto" in line for line in lines) <= 1 and "Estimated shape parameter" not in out + err
    pareto = [line for line in lines if "Pareto" in line]
    assert all(line.startswith("warning: Pareto k >") and ("chinchilla (" in line or "kaplan (" in line)
               for line in pareto)
    assert main(["compare", str(runs_csv), "--laws", "chinchilla,kaplan", "--x", "N=params,D=tokens", "--json",
                 *FAST]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["family"] for r in rows] == ["chinchilla", "kaplan"] and {"fit_ok", "max_rhat", "diff_se"} <= set(rows[0])


def test_next_runs_and_report_take_saved_fits(fit_files, runs_csv, tmp_path, monkeypatch, capsys):
    import bayescale as bs
    import bayescale.decisions.risk as risk

    def no_refit(*a, **k):
        raise AssertionError("refitted although a saved fit was given")

    monkeypatch.setattr(bs, "fit", no_refit)
    monkeypatch.setattr(risk, "fit", no_refit)
    chin, kap = map(str, fit_files)
    assert main(["next-runs", chin, "--target", "N=70B,D=1.4T;N=35B,D=2.8T", "--grid", "N=100M:1B:2",
                 "--grid", "D=2e9,2e10", "--outcomes", "8", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["rows"]) == 4 and res["rows"][0]["chosen"]
    assert main(["next-runs", chin, "--target", "N=70B,D=1.4T", "--grid", "N=100M:1B:2", "--grid", "D=2e9,2e10",
                 "--outcomes", "8"]) == 0
    head = [ln for ln in capsys.readouterr().out.splitlines() if "variance cut" in ln]
    assert head and "expected_var_reduction" not in head[0] and len(head[0].split()) <= 10  # what a person reads
    assert main(["report", "--fit", chin, "--fit", kap, "--option", "N=70B,D=1.4T", "--option", "35B,2.8T",
                 "--target-loss", "2.0", "--out", str(tmp_path / "rep"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s["weights"]) == {"chinchilla", "kaplan"} and list(s["options"]) == ["N=70B,D=1.4T", "35B,2.8T"]
    assert (tmp_path / "rep" / "report.html").exists()
    assert main(["report", chin, "--law", "kaplan", "--option", "70B,1.4T", "--target-loss", "2.0",
                 "--out", str(tmp_path / "rep")]) == 2
    assert "saved fit(s) are of chinchilla" in capsys.readouterr().err
    assert main(["next-runs", str(tmp_path / "rep" / "report.json"), "--target", "N=70B,D=1.4T",
                 "--grid", "N=1e8:1e9:2", "--grid", "D=2e9:2e10:2"]) == 2
    assert "give --law NAME" in capsys.readouterr().err  # not a fit: a run table, which needs --law
    # from a run table, a bad target or option stops before fitting (fit would raise here)
    fit_args = [str(runs_csv), "--law", "chinchilla", "--x", "N=params,D=tokens"]
    assert main(["next-runs", *fit_args, "--target", "N=7e10;1e9,D=1.4e12", "--grid", "N=1e8:1e9:2",
                 "--grid", "D=2e9:2e10:2"]) == 2
    assert "bad target: could not parse points" in capsys.readouterr().err
    assert main(["report", *fit_args, "--option", "N=70B;D=1T", "--target-loss", "2.0",
                 "--out", str(tmp_path / "rep2")]) == 2
    assert "point 'N=70B': missing D" in capsys.readouterr().err


def test_laws_compact_table_and_one_family(capsys):
    assert main(["laws"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["name", "inputs", "points", "formula"]
    assert max(map(len, out.splitlines())) <= 100 and "chinchilla" in out and "bayescale laws NAME" in out
    for argv in (["laws", "chinchilla"], ["laws", "--law", "chinchilla"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "L = E + A / N^alpha + B / D^beta" in out and max(map(len, out.splitlines())) <= 100
        assert "model-size exponent (> 0)" in out and "prior: LogNormal: median 0.3" in out  # Param.description, prior
        assert "irreducible loss" in out and "scaled by the data" in out
    assert main(["laws", "kaplan", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in res["parameters"]] == ["m", "w", "alphaN", "alphaD"]
    assert all(p["description"] and p["prior"] for p in res["parameters"])
    assert main(["laws", "chinchila"]) == 2 and "unknown law 'chinchila'" in capsys.readouterr().err
    for command in ("next-runs", "fit", "laws"):   # every --law lists the families
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "chinchilla, downstream, kaplan" in " ".join(capsys.readouterr().out.split()), command


def test_report_law_optional_with_laws_and_out_file_is_an_error(runs_csv, tmp_path, capsys):
    base = ["report", str(runs_csv), "--x", "N=params,D=tokens", "--option", "70B,1.4T", "--target-loss", "2.0"]
    # --law is no longer required with --laws: the first family is the law (an unknown one is named)
    assert main([*base, "--laws", "chinchila,kaplan", "--out", str(tmp_path / "rep")]) == 2
    assert "unknown law 'chinchila'" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "rep")]) == 2
    assert "give --law NAME or --laws A,B" in capsys.readouterr().err
    existing = tmp_path / "report.txt"
    existing.write_text("not a folder")
    for family in (["--laws", "chinchilla,kaplan"], ["--law", "chinchilla"]):
        assert main([*base, *family, "--out", str(existing)]) == 2  # before any fitting
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "is an existing file" in err and len(err.strip().splitlines()) == 1


def test_compute_optimal_from_a_saved_fit_and_from_isoflop_runs(fit_files, tmp_path, capsys):
    """`bayescale compute-optimal`: N*, D*, tokens per parameter and L* with intervals; the law's optimum where the
    runs hold no isoFLOP profile, checked by them where they do (issue 16)."""
    assert main(["compute-optimal", str(fit_files[0]), "--budget", "1e22,1e24", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["budget"] == [1e22, 1e24] and res["level"] == [0.8]
    assert res["optimum"].startswith("the law's (0 isoFLOP profiles")
    lo, med, hi = (res[f"N_opt_{k}"] for k in ("lower", "median", "upper"))
    assert lo[0][0] < med[0] < hi[0][0] and med[0] < med[1]
    # runs on isoFLOP profiles (sizes around Hoffmann et al.'s optimum at four budgets, 1% noise)
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    E, A, alpha, B, beta = 1.69, 406.4, 0.34, 410.7, 0.28
    g = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    rows = []
    for c in (1e18, 1e19, 1e20, 1e21):
        n = g * (c / 6) ** (beta / (alpha + beta)) * np.exp(np.linspace(-1.5, 1.5, 7))
        d = c / (6 * n)
        rows.append(pd.DataFrame({"params": n, "tokens": d, "loss": (E + A / n**alpha + B / d**beta)
                                  * np.exp(rng.normal(0, 0.01, 7))}))
    path = tmp_path / "isoflop.csv"
    pd.concat(rows).to_csv(path, index=False)
    assert main(["compute-optimal", str(path), "--law", "chinchilla", "--x", "N=params,D=tokens", "--budget",
                 "1e23", *FAST]) == 0
    out = capsys.readouterr().out
    assert "tokens per parameter" in out and "corrected by 4 isoFLOP profiles" in out
    assert "isoFLOP profile (FLOP)" in out and out.count(" yes") == 4
    assert main(["compute-optimal", str(fit_files[0]), "--budget", "lots"]) == 2
    assert "--budget 'lots'" in capsys.readouterr().err
    assert main(["compute-optimal", str(path), "--budget", "1e23"]) == 2
    assert "give --law" in capsys.readouterr().err
    assert main(["compute-optimal", str(fit_files[0]), "--budget", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err
    # a law not in N and D is refused before any fitting
    assert main(["compute-optimal", str(path), "--law", "M2", "--x", "params", "--y", "loss", "--budget", "1e23"]) == 2
    assert "needs a law in model size N and tokens D" in capsys.readouterr().err


def test_fit_pools_a_fleets_errors_and_saves_them(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    import bayescale as bs

    rng = np.random.default_rng(6)
    x = np.geomspace(1e6, 1e9, 12)
    bend = 0.25 * np.maximum(0.0, np.log10(x / 1e8))
    runs = pd.concat([pd.DataFrame({"x": x, "y": (0.3 + 20.0 * x**-0.3) * np.exp(k * bend + rng.normal(0, 0.005, 12)),
                                    "curve": f"c{i}"}) for i, k in enumerate([1.0, 1.0, 0.0])], ignore_index=True)
    path = tmp_path / "fleet.csv"
    runs.to_csv(path, index=False)
    assert main(["fit", str(path), "--law", "M2", "--x", "x", "--y", "y", "--group", "curve", "--pool-errors",
                 "--out", str(tmp_path / "fit.nc"), "--json", *FAST]) == 0
    report = json.loads(capsys.readouterr().out)
    assert all("runs of the 2 other curves of its domain" in r["extrapolation_error"] for r in report.values())
    saved = bs.load_fit(tmp_path / "fit_c2.nc")
    assert "other curves of its domain" in saved.error.method
    assert main(["fit", str(path), "--law", "M2", "--x", "x", "--y", "y", "--pool-errors", *FAST]) == 2
    assert "--group" in capsys.readouterr().err
