"""Process set-up (bayescale.config): float64, what ``import bayescale`` does and does not do, settings, setup()."""

import subprocess
import sys

import pytest

import bayescale as bs
from bayescale import config


def run_python(code, home, **env):
    """Run ``code`` in a fresh interpreter with ``HOME=home``; returns its stdout (fails the test on an error)."""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(home), **env})
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_float64_enabled():
    import jax.numpy as jnp

    assert jnp.zeros(1).dtype == jnp.float64


@pytest.mark.parametrize("first", ["import arviz; import bayescale", "import bayescale; import arviz"])
def test_arviz_imported_first_or_after_still_works(first, tmp_path):
    # arviz leaves a lazy placeholder for numpyro; a first `import numpyro.distributions` through it used to leave
    # that subpackage without its submodules, and numpyro.factor failed
    code = (f"{first}; import numpyro.distributions as d, numpyro, sys\n"
            "assert hasattr(d, 'distribution') and sys.modules['numpyro.distributions'] is d\n"
            "from numpyro.handlers import seed, trace\n"
            "def m(): numpyro.factor('f', 1.0)\n"
            "print(len(trace(seed(m, 0)).get_trace()))")
    assert run_python(code, tmp_path) == "1"


def test_import_is_light_and_leaves_home_alone(tmp_path):
    code = ("import sys, bayescale\n"
            "heavy = ('matplotlib', 'arviz', 'arviz_base', 'arviz_plots', 'arviz_stats', 'scipy.stats', 'pymc', "
            "'equinox', 'pandas', 'xarray')\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n"
            "import jax; print(jax.config.jax_compilation_cache_dir)")
    assert run_python(code, tmp_path).splitlines() == ["[]", "None"]
    assert not (tmp_path / ".cache").exists()


def test_fitting_modules_leave_arviz_stats_to_the_sampler(tmp_path):
    # ArviZ's statistics (with SciPy's) take about 0.6 s to import: a fit imports them while its compiled sampler runs
    code = "import sys, bayescale.fit, bayescale.sampler; print('arviz_stats' in sys.modules)"
    assert run_python(code, tmp_path) == "False"


def test_import_meanwhile_finishes_before_the_fit_goes_on(tmp_path, monkeypatch):
    from bayescale.config import import_meanwhile

    (tmp_path / "slow_module_ok.py").write_text("import time\ntime.sleep(0.2)\nDONE = True\n")
    (tmp_path / "slow_module_bad.py").write_text("raise ImportError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "slow_module_two.py").write_text("import time\ntime.sleep(0.1)\nDONE = True\n")
    thread = import_meanwhile("slow_module_ok", "slow_module_two")
    thread.join()
    assert sys.modules["slow_module_ok"].DONE and sys.modules["slow_module_two"].DONE
    assert import_meanwhile("slow_module_ok") is None  # already imported: nothing to do
    import_meanwhile("slow_module_bad").join()  # the thread stays silent; the main thread's import says why
    with pytest.raises(ImportError, match="broken on purpose"):
        import slow_module_bad  # noqa: F401


def test_setup_enables_the_cache_once(tmp_path):
    code = ("import bayescale as bs, jax\n"
            "bs.config.setup(); bs.config.setup()\n"
            "print(jax.config.jax_compilation_cache_dir)\n"
            "print(jax.config.jax_persistent_cache_min_compile_time_secs)")
    cache = tmp_path / ".cache" / "bayescale" / "jax"
    assert run_python(code, tmp_path).splitlines() == [str(cache), "0.05"]
    assert cache.is_dir()

    out = run_python(code, tmp_path / "h2", BAYESCALE_JAX_CACHE="off")
    assert out.splitlines()[0] == "None" and not (tmp_path / "h2").exists()
    own = tmp_path / "own"
    out = run_python(code, tmp_path, BAYESCALE_JAX_CACHE=str(own), BAYESCALE_JAX_CACHE_MIN_COMPILE_SECS="0.25")
    assert out.splitlines() == [str(own), "0.25"] and own.is_dir()


def test_setup_keeps_the_callers_own_cache(tmp_path):
    code = (f"import jax; jax.config.update('jax_compilation_cache_dir', {str(tmp_path / 'mine')!r})\n"
            "import bayescale as bs; bs.config.setup(); print(jax.config.jax_compilation_cache_dir)")
    assert run_python(code, tmp_path) == str(tmp_path / "mine")
    assert not (tmp_path / ".cache").exists()


def test_run_nuts_calls_setup_first(monkeypatch):
    from bayescale.sampler import SamplerSettings, run_nuts

    class Called(Exception):
        pass

    def setup():
        raise Called

    monkeypatch.setattr(config, "setup", setup)
    with pytest.raises(Called):
        run_nuts(None, None, None, SamplerSettings(), n_params=1)


def test_cpu_devices_from_the_environment(tmp_path):
    code = "import bayescale, jax; print(len(jax.devices('cpu')))"
    assert run_python(code, tmp_path, BAYESCALE_CPU_DEVICES="3") == "3"
    res = subprocess.run([sys.executable, "-c", "import bayescale"], capture_output=True, text=True, timeout=180,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "BAYESCALE_CPU_DEVICES": "many"})
    assert res.returncode != 0 and "BAYESCALE_CPU_DEVICES" in res.stderr


def test_settings_are_validated():
    s = config.Settings(**dict(config.settings))
    s["cpu.devices"] = "4"
    s["cache.enabled"] = "off"
    s["cache.min_compile_secs"] = "0.1"
    s["gc.freeze"] = "off"
    assert (s["cpu.devices"], s["cache.enabled"], s["cache.min_compile_secs"], s["gc.freeze"]) == (4, False, 0.1, False)
    for key, bad in [("cpu.devices", 0), ("cpu.devices", "two"), ("cache.enabled", "maybe"), ("gc.freeze", "later"),
                     ("lfo.refit_draws", 0), ("lfo.refit_chains", 0), ("lfo.refit_chains", "all"),
                     ("cache.min_compile_secs", -1), ("cache.min_compile_secs", "nan"), ("cache.dir", "")]:
        with pytest.raises(ValueError, match=key):
            s[key] = bad
    with pytest.raises(KeyError):
        s["cache.size"] = 1
    with pytest.raises(TypeError):
        del s["cpu.devices"]
    assert set(s) == set(config.settings) and len(s) == 7


def test_helpers():
    assert config.usable_cores() >= 1
    assert isinstance(config.cpu_model(), str) and config.cpu_model()
    assert config.backend() == "cpu"


def test_public_names_load_lazily(tmp_path):
    names = bs.__all__
    code = ("import bayescale as bs, sys, types\n"
            f"for n in {names!r}:\n"
            "    exec(f'from bayescale import {n}')\n"
            "    assert n in dir(bs)\n"
            "import bayescale.compare  # loading a module does not hide the function of its name\n"
            "assert all(isinstance(f, types.FunctionType) for f in (bs.fit, bs.compare, bs.next_runs))\n"
            "assert bs.fit is sys.modules['bayescale.fit'].fit and bs.laws is sys.modules['bayescale.laws']\n"
            "print(hasattr(bs, 'no_such_name'))")
    assert run_python(code, tmp_path) == "False"


def test_the_first_fit_freezes_the_imported_objects_once(tmp_path, chinchilla_fit):
    """The garbage collector skips the libraries' objects after the first fit (a faster fit and exit); once per
    process, and never with ``BAYESCALE_GC_FREEZE=off``."""
    import gc

    assert gc.get_freeze_count() > 50_000 and config.freeze_imports() is False  # the fixture's fit froze them
    code = ("import gc; before = gc.get_freeze_count()\n"   # Python itself starts with a few hundred
            "import bayescale as bs\n"
            "print(bs.config.freeze_imports(), gc.get_freeze_count() > before + 50_000, bs.config.freeze_imports())")
    assert run_python(code, tmp_path) == "True True False"
    assert run_python(code, tmp_path, BAYESCALE_GC_FREEZE="off") == "False False False"


def test_make_test_runs_a_worker_per_core_each_with_its_share_of_the_cores():
    """`make test` runs the suite in pytest-xdist workers (a dependency of the test extra), and each worker takes
    its share of the cores as JAX CPU devices: two workers on two cores do not each start two devices."""
    import os
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    recipe = re.search(r"^test:.*?(?=^\S)", (root / "Makefile").read_text(), re.S | re.M).group(0)
    assert "-n $(TEST_WORKERS)" in recipe and "--dist worksteal" in recipe
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(req.startswith("pytest-xdist") for req in extra)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        assert config.settings["cpu.devices"] == max(1, config.usable_cores() // workers)
