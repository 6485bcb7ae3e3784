"""Saved sampling programs (``bayescale.programs``): a new process loads the traced programs instead of tracing
them, with the same draws; nothing is saved for a user's own law; a damaged file is traced again. A fit's sampler is
three programs (starting points, chains, outputs), so NUTS' own settings or a progress bar leave the others as
they are."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale import config, programs
from bayescale.laws import get_law, is_builtin
from tests.conftest import FAST


@pytest.fixture
def program_dir(tmp_path, monkeypatch):
    """A fresh, empty cache directory, and this process's loaded programs forgotten (as in a new process)."""
    monkeypatch.setitem(config.settings, "cache.dir", str(tmp_path))
    monkeypatch.setitem(config.settings, "cache.enabled", True)
    programs.forget()
    return tmp_path / "programs"


def _fit(runs, law="M2", **kw):
    return bs.fit(runs, law, x="x", y="y", seed=0, **{**FAST, **kw})


def _runs():
    x = np.geomspace(1e6, 1e9, 12)
    return pd.DataFrame({"x": x, "y": 0.5 + 2.0 * (x / 1e6) ** -0.3 * np.exp(np.random.default_rng(0).normal(0, 0.01, 12))})


def test_a_saved_program_is_loaded_not_traced_and_gives_the_same_draws(program_dir, monkeypatch):
    runs, real_export = _runs(), programs.jax.export.export
    first = _fit(runs)
    saved = list(program_dir.glob("*.bin"))
    assert len(saved) == 3  # starting points, chains, outputs
    programs.forget()  # a new process

    def no_tracing(*a, **k):
        raise AssertionError("traced again although a saved program was there")

    monkeypatch.setattr(programs.jax.export, "export", no_tracing)
    second = _fit(runs)
    for k in first.param_names:
        assert np.array_equal(first.posterior[k].values, second.posterior[k].values), k
    # the cache off: nothing read or written, and the same draws (the program exported in memory)
    monkeypatch.setattr(programs.jax.export, "export", real_export)
    programs.forget()
    monkeypatch.setitem(config.settings, "cache.enabled", False)
    for f in saved:
        f.unlink()
    third = _fit(runs)
    assert not list(program_dir.glob("*.bin"))
    for k in first.param_names:
        assert np.array_equal(first.posterior[k].values, third.posterior[k].values), k


def test_a_damaged_program_file_is_traced_again(program_dir, monkeypatch):
    runs = _runs()
    first = _fit(runs)
    path = sorted(program_dir.glob("*.bin"))[0]
    path.write_bytes(b"not a program")
    programs.forget()
    second = _fit(runs)
    assert np.array_equal(first.posterior["c"].values, second.posterior["c"].values)
    assert path.read_bytes() != b"not a program"  # replaced by the program traced again


def test_a_users_law_is_never_saved(program_dir):
    import dataclasses

    mine = dataclasses.replace(get_law("M2"), name="my_M2")
    bs.register_law(mine, overwrite=True)
    try:  # registered for this test only: tests run in any order in a worker of `make test`
        assert not is_builtin(mine) and is_builtin(get_law("M2"))
        _fit(_runs(), law="my_M2")
        assert not program_dir.exists() or not list(program_dir.glob("*.bin"))
    finally:
        bs.laws.LAWS.pop("my_m2")


def test_a_different_shape_or_setting_is_another_program(program_dir):
    runs = _runs()
    _fit(runs)
    assert len(list(program_dir.glob("*.bin"))) == 3
    _fit(runs, max_tree_depth=8)  # a NUTS setting: another chains' program, the same starts and outputs
    assert len(list(program_dir.glob("*.bin"))) == 4
    _fit(runs.iloc[:10])  # padded to the same length: no new program for fewer runs
    # lengths are the program's inputs: other warm-up, draws, chains or target acceptance run in the same program
    _fit(runs, warmup=100, samples=200, chains=3, target_accept=0.95)
    assert len(list(program_dir.glob("*.bin"))) == 4


def test_a_progress_bar_from_inside_the_chains_program_is_never_saved(program_dir, capsys):
    """``progress=True`` advances a bar from inside the chains' program (a host callback, which cannot be saved):
    that program is traced, not saved, while the starting points' and the outputs' are; and the same draws as the
    saved programs give (with lognormal noise: with Student-t noise on several CPU devices a program traced straight
    into XLA rounds differently from an exported one, which NUTS amplifies)."""
    runs = _runs()
    shown = _fit(runs, progress=True, likelihood="lognormal")
    assert len(list(program_dir.glob("*.bin"))) == 2
    assert "NUTS M2" in capsys.readouterr().err
    saved = _fit(runs, likelihood="lognormal")
    assert np.array_equal(shown.posterior["c"].values, saved.posterior["c"].values)


@pytest.mark.parametrize("likelihood", ["logstudentt", "beta"])
def test_the_noise_models_programs_are_saved_and_loaded_with_the_same_results(program_dir, monkeypatch, likelihood):
    from bayescale import noise

    mu, sigma = np.array([[0.3, 0.6, 0.9]] * 5), np.full((5, 1), 0.05)
    y = noise.sample(likelihood, mu, sigma, seed=3, df=4.0, extra=np.full(3, 0.01))
    lp = noise.log_prob(likelihood, y, mu, sigma, 4.0, extra=np.full(3, 0.01))
    assert y.shape == lp.shape == (5, 3) and np.isfinite(lp).all()
    assert len(list(program_dir.glob("*.bin"))) == 2  # one sampling, one density program
    programs.forget()  # a new process: loads them, traces nothing, gives the same numbers

    def no_tracing(*a, **k):
        raise AssertionError("traced again although a saved program was there")

    monkeypatch.setattr(programs.jax.export, "export", no_tracing)
    assert np.array_equal(noise.sample(likelihood, mu, sigma, seed=3, df=4.0, extra=np.full(3, 0.01)), y)
    assert np.array_equal(noise.log_prob(likelihood, y, mu, sigma, 4.0, extra=np.full(3, 0.01)), lp)


def test_the_noise_models_programs_serve_every_shape(program_dir):
    """A prediction's noise is drawn, and its density taken, in programs compiled for two lengths (a Student-t
    sampler compiles in over a second), whatever shape the draws have: many shapes, two sampling programs; the same
    seed and shape, the same draws; a large array is drawn in chunks that are not copies of each other."""
    from bayescale import noise

    shapes = [(1,), (3,), (7, 5), (40, 25), (400, 3), (30, 700)]
    draws = {s: noise.sample("logstudentt", np.ones(s), 0.1, seed=1) for s in shapes}
    assert all(draws[s].shape == s and np.isfinite(draws[s]).all() for s in shapes)
    for s in shapes:
        noise.log_prob("logstudentt", draws[s], np.ones(s), 0.1)
    assert len(list(program_dir.glob("*.bin"))) == 4  # short and long, for sampling and for the density
    assert np.array_equal(noise.sample("logstudentt", np.ones((30, 700)), 0.1, seed=1), draws[(30, 700)])
    flat = draws[(30, 700)].ravel()
    assert not np.isin(flat[16384:16384 + 100], flat[:16384]).any()


@pytest.fixture
def samplers(program_dir, monkeypatch):
    """The sampler programs traced from here on (each of a sampler's three programs takes the runs' mask, a bool
    array)."""
    traced, real = [], programs.jax.export.export

    def export(fn):
        def run(*args):
            exported = real(fn)(*args)
            if any(a.dtype == bool for a in exported.in_avals):
                traced.append(exported)
            return exported
        return run

    monkeypatch.setattr(programs.jax.export, "export", export)
    return traced


def test_a_fit_and_its_own_refits_run_in_one_sampler(samplers, monkeypatch):
    """A fit predicting with an error model refits for its own leave-future-out errors (fewer runs, draws and
    chains): they run in the fit's compiled programs, so a new user's first process traces and compiles one
    sampler, and a later process loads it and traces none."""
    monkeypatch.setitem(config.settings, "lfo.refit_draws", 100)  # refits unlike the fit
    runs = _runs().iloc[:9]  # padded to 16; a refit to 8 runs alone would be padded to 8
    fit = _fit(runs, chains=4, warmup=400, samples=400)
    first = fit.predict({"x": [1e10]}).table()
    assert len(samplers) == 3 and len(fit.own_errors()[0])  # refitted, in the fit's programs
    programs.forget()  # a new process: loads those programs, and predicts the same
    assert _fit(runs, chains=4, warmup=400, samples=400).predict({"x": [1e10]}).table().equals(first)
    assert len(samplers) == 3


def test_a_fleet_its_fits_own_refits_and_its_retries_run_in_one_sampler(samplers):
    """``fit_many`` on a CPU (one curve per batch) runs each curve in a single curve's program, padded to the
    fleet's length: the fits' own refits and the retries of flagged curves (twice the warm-up) run in it too."""
    x = np.geomspace(1e6, 1e9, 12)
    noise = np.random.default_rng(1).normal(0, 0.01, (3, 12))
    runs = pd.DataFrame({"x": np.tile(x, 3)[:-2], "curve": np.repeat([0, 1, 2], 12)[:-2],
                         "y": (0.5 + np.repeat([2.0, 2.5, 3.0], 12) * np.tile(x / 1e6, 3) ** -0.3
                               * np.exp(noise.ravel()))[:-2]})
    fits = bs.fit_many(runs, "M2", x="x", y="y", group="curve", seed=0, **{**FAST, "warmup": 20})
    for f in fits.values():
        assert len(f.own_errors()[0])
    assert fits.refitted  # 20 warm-up steps fail the diagnostics: refitted with 40
    assert len(samplers) == 3  # a single curve's starting points, chains and outputs


def test_fewer_chains_or_draws_are_the_first_ones_of_more(program_dir):
    """Chains and draws are lengths of one program: a fit with fewer chains or draws gives the first chains and
    draws of the same fit with more (same seed)."""
    runs = _runs()
    big = _fit(runs, chains=4, samples=500)
    for kw in (dict(chains=4, samples=200), dict(chains=2, samples=500), dict(chains=1, samples=50)):
        small = _fit(runs, **kw)
        for k in big.param_names:
            want = big.posterior[k].values[:kw["chains"], :kw["samples"]]
            assert np.array_equal(small.posterior[k].values, want), (kw, k)
    assert len(list(program_dir.glob("*.bin"))) == 3


_GROWTH = """
import numpy as np, pandas as pd, jax, arviz_stats, bayescale as bs
def private():
    with open("/proc/self/status") as fh:
        return int(next(l for l in fh if l.startswith("RssAnon:")).split()[1]) / 1024
x = np.geomspace(1e6, 1e9, 12)
runs = pd.DataFrame({"x": x, "y": 0.5 + 2.0 * (x / 1e6) ** -0.3 * np.exp(np.random.default_rng(0).normal(0, 0.01, 12))})
jax.numpy.zeros(1).block_until_ready()
before = private()
bs.fit(runs, "M2", x="x", y="y", seed=0, error="raw", chains=2, warmup=50, samples=50, progress=False)
print(private() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists() or platform.libc_ver()[0] != "glibc",
                    reason="reads Linux's /proc/self/status; glibc's heap")
def test_loading_a_saved_sampler_leaves_its_freed_memory_to_the_system(tmp_path):
    """Loading a compiled NUTS program frees most of what it allocates (about 100 MiB), but the C heap kept those
    pages resident; now they go back, so a process that has loaded its sampler holds far less memory (in a fresh
    process: +146 MiB private before, +50 after, for this small law)."""
    cache = config.settings["cache.dir"] if config.settings["cache.enabled"] else str(tmp_path)  # warm: no compile
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "BAYESCALE_JAX_CACHE": cache}
    grown = [float(subprocess.run([sys.executable, "-c", _GROWTH], env=env, capture_output=True, text=True,
                                  check=True).stdout.split()[-1]) for _ in range(2)]  # (compiled and) saved; loaded
    assert grown[1] < 100, grown
