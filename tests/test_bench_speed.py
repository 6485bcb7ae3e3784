"""Smoke test of benchmarks/speed.py on a tiny configuration: keys present, numbers finite (no timing thresholds)."""

import json
import math

from benchmarks import speed

TINY = speed.Config(chains=2, warmup=30, samples=30, n_boot=20, ls_starts=2, emcee_walkers=16, emcee_steps=100,
                    n_curves=2, separate_subset=2, warm_cache=False, sampler={"n_starts": 2, "opt_steps": 20})


def _finite(d, *keys):
    for k in keys:
        assert isinstance(d[k], (int, float)) and math.isfinite(d[k]), (k, d[k])


def test_speed_benchmark_quick(tmp_path):
    res = json.loads(json.dumps(speed.run(TINY, "test"), default=float))  # JSON-serialisable
    assert {"config", "machine", "nuts", "bootstrap", "nuts_vs_bootstrap", "emcee", "fit_many"} <= res.keys()
    assert res["machine"]["cpu_count"] >= 1 and res["machine"]["versions"]["jax"] and "git_commit" in res["machine"]
    _finite(res["nuts"], "first_call_s", "sampling_s", "compile_s", "min_ess_bulk", "ess_per_s", "max_rhat",
            "divergences")
    assert res["nuts"]["runs"] == 222
    _finite(res["bootstrap"], "bootstrap_s", "single_fit_s")
    assert res["bootstrap"]["failed_refits"] < TINY.n_boot
    _finite(res["nuts_vs_bootstrap"], "first_call_over_bootstrap", "sampling_over_bootstrap")
    e = res["emcee"]
    _finite(e, "sampling_s", "min_ess_bulk", "ess_per_s", "nuts_over_emcee_ess_per_s", "acceptance")
    assert e["logp_vs_nuts_lp_max_abs_diff"] < 1e-6  # emcee samples exactly bayescale's posterior
    assert set(e["ess_bulk"]) == {"E", "a", "alpha", "b", "beta", "sigma"}
    m = res["fit_many"]
    _finite(m, "fit_many_s", "separate_total_s", "speedup", "speedup_compile_aware")
    assert m["curves"] == 2 and m["separate_timed"] == 2 and not m["separate_extrapolated"]
    assert 0 <= m["fit_many_ok"] <= 2 and 0 <= m["separate_ok"] <= 2

    md = tmp_path / "RESULTS.md"
    md.write_text("# Benchmark results\n\n<!-- other:start -->\nkeep me\n<!-- other:end -->\n")
    for _ in range(2):  # replacing the section twice leaves one copy and the other section intact
        speed.update_markdown(md, speed.markdown(res))
    text = md.read_text()
    assert text.count(speed.START) == 1 and "keep me" in text and "| Measure | Value |" in text


def test_child_timeout_gives_none():
    out, stdout = speed._child("fit_many_timed", TINY, timeout=2)
    assert out is None and isinstance(stdout, str)
