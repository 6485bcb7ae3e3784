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
    assert "median" in capsys.readouterr().out
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
