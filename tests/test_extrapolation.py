"""Extrapolation benchmark in quick mode (--limit 2, tiny sampler settings, a temporary results folder)."""

import json
import sys
import types

import numpy as np
import pytest
from scipy import stats

from benchmarks import extrapolation as ex

TINY = ["--chains", "2", "--warmup", "60", "--samples", "60", "--boot", "12"]


def _run(tmp_path, *argv):
    return ex.main([*argv, "--results", str(tmp_path), *TINY])


def _check(res: dict, suite: str, method: str, tmp_path):
    path = tmp_path / f"{suite}__{method.replace(':', '-')}.json"
    d = json.loads(path.read_text())
    assert d["suite"] == suite and d["method"] == method and d["seed"] == 0
    assert {"bayescale", "cpu_count"} <= set(d["machine"]) and d["wall_s"] > 0 and d["command"]
    pooled = d["aggregate"]["pooled"]
    assert pooled["curves"] == len([c for c in d["curves"] if "failed" not in c]) >= 1
    for c in d["curves"]:
        assert {"rmsle", "ll", "ll_nsl", "msce", "width90", "crps", "coverage", "seconds"} <= set(c)
        cov = [c["coverage"][str(lv)] for lv in ex.LEVELS]
        assert all(0 <= v <= 1 for v in cov) and cov == sorted(cov)  # nested intervals
        assert c["rmsle"] >= 0 and np.isfinite(c["ll"])
    return d


def test_suites_and_splits():
    rev = ex.load_suite("revisiting")
    assert len(rev) == 92 and sum(t.domain == "IC" for t in rev) == 72
    ch = ex.load_suite("chinchilla")
    assert len(ch) == 1 and len(ch[0].tgt) == 23 and ch[0].ctx["C"].max() < 1e21
    gad = ex.load_suite("gadre")
    assert {t.domain for t in gad} == {"loss", "downstream"} and len(gad) == 6
    assert all(t.ctx["N"].max() < 4.2e8 if "N" in t.ctx else True for t in gad)
    col = ex.load_suite("colpret", limit=2)
    assert len(col) == 2 and all(t.tgt["x"].min() > t.ctx["x"].max() for t in col)
    assert all(t.nsl_c == t.ctx["y"].max() for t in col)
    with pytest.raises(SystemExit, match="no domain"):
        ex.load_suite("revisiting", domain="XX")


def test_perfect_predictor_and_gaussian_scores():
    task = ex.load_suite("revisiting", domain="BB", limit=1)[0]
    y = task.tgt["y"].to_numpy()
    row = ex.score(task, np.tile(y, (50, 1)), np.zeros_like(y))
    assert row["rmsle"] == 0 and all(v == 1 for v in row["coverage"].values()) and row["crps"] == pytest.approx(0)
    # Gaussian predictive centred on the truth: analytic log density and coverage
    rng = np.random.default_rng(0)
    sd = 0.01
    draws = y + sd * stats.norm.ppf((np.arange(4000) + 0.5) / 4000)[:, None]
    row = ex.score(task, draws, stats.norm(y, sd).logpdf(y))
    assert row["ll"] == pytest.approx(stats.norm(0, sd).logpdf(0))
    assert all(v == 1 for v in row["coverage"].values())  # y sits at the centre of every interval
    assert row["rmsle"] == pytest.approx(0, abs=1e-12)
    del rng


def test_stacking_weights_pick_the_better_family():
    rng = np.random.default_rng(1)
    good = rng.normal(1.0, 0.1, 40)
    w = ex.stacking_weights(np.stack([good - 3.0, good], axis=1))
    assert w[1] > 0.99 and w.sum() == pytest.approx(1)
    assert ex.stacking_weights(good[:, None]) == pytest.approx([1.0])


def test_quick_revisiting_nuts_bma_ls_boot(tmp_path):
    for m in ("nuts:M2", "bma", "ls:M2", "boot:M2"):
        _run(tmp_path, "--suite", "revisiting", "--domain", "BB", "--limit", "2", "--method", m)
        d = _check(None, "revisiting", m, tmp_path)
        assert d["aggregate"]["pooled"]["curves"] == 2 and set(d["aggregate"]) == {"pooled", "BB"}
    bma = json.loads((tmp_path / "revisiting__bma.json").read_text())
    assert all(c["weights"] == {"M2": 1.0} for c in bma["curves"])  # one cached family: weight 1
    nuts = json.loads((tmp_path / "revisiting__nuts-M2.json").read_text())
    # a one-family average is that family: same exact log density
    assert [c["ll"] for c in bma["curves"]] == pytest.approx([c["ll"] for c in nuts["curves"]])
    out = ex.main(["--table", "--results", str(tmp_path), "--markdown", str(tmp_path / "R.md")])
    md = (tmp_path / "R.md").read_text()
    assert "<!-- extrapolation:start -->" in md and "published, not rerun" in md and "### Goals" in md
    assert "| revisiting | BB | nuts:M2 |" in md and out["plots"]


def test_quick_other_suites_baselines(tmp_path):
    _run(tmp_path, "--suite", "colpret", "--limit", "2", "--method", "ls:M2")
    d = _check(None, "colpret", "ls:M2", tmp_path)
    c = d["curves"][0]
    assert c["ll_nsl"] > c["ll"]  # y / max(context y) with max y > 1 (losses): density rises by log c
    _run(tmp_path, "--suite", "chinchilla", "--method", "ls:chinchilla")
    _check(None, "chinchilla", "ls:chinchilla", tmp_path)
    _run(tmp_path, "--suite", "gadre", "--limit", "2", "--method", "boot:downstream")
    d = _check(None, "gadre", "boot:downstream", tmp_path)
    assert {c["domain"] for c in d["curves"]} == {"downstream"} and len(d["curves"]) == 2


def test_pfn_is_picked_up_when_available(tmp_path, monkeypatch):
    """A stand-in bayescale.pfn with the agreed interface: the benchmark runs it without changes."""

    class Pred:
        def __init__(self, xq):
            self.mu, self.sd = np.full(len(xq), 0.5), 0.1

        def quantile(self, q):
            return stats.norm(self.mu, self.sd).ppf(np.asarray(q)[:, None])

        def logpdf(self, y):
            return stats.norm(self.mu, self.sd).logpdf(y)

        def sample(self, n, seed):
            return np.random.default_rng(seed).normal(self.mu, self.sd, (n, len(self.mu)))

    fake = types.ModuleType("bayescale.pfn")
    fake.available = lambda: True
    fake.predictive = lambda x_ctx, y_ctx, x_query, seed=0: Pred(x_query)
    monkeypatch.setitem(sys.modules, "bayescale.pfn", fake)
    assert "pfn" in ex.methods_for("revisiting")
    _run(tmp_path, "--suite", "revisiting", "--domain", "BB", "--limit", "2", "--method", "pfn")
    d = _check(None, "revisiting", "pfn", tmp_path)
    task = ex.load_suite("revisiting", domain="BB", limit=1)[0]
    y = task.tgt["y"].to_numpy()
    assert d["curves"][0]["ll"] == pytest.approx(np.mean(stats.norm(0.5, 0.1).logpdf(y)))
    assert d["curves"][0]["rmsle"] == pytest.approx(np.sqrt(np.mean(np.log(0.5 / y) ** 2)))
