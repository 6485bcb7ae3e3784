"""Process set-up: validated settings, the JAX state every fit relies on, and :func:`setup` for the rest.

``import bayescale`` imports this module, which does only what has to come before any JAX work in the package (each
bayescale module is imported through the package, so this runs first):

- float64 on: arrays made before the switch stay float32;
- one JAX CPU device per usable core (``settings["cpu.devices"]``): JAX fixes the count when its backends start, at
  the first array. If something else started them before bayescale was imported, the chains share one device,
  which is slower and gives the same draws up to floating-point rounding;
- NumPyro imported as a package: ``import arviz`` leaves a lazy placeholder for ``numpyro`` in ``sys.modules``
  (``arviz_base.io_numpyro``), and a first ``import numpyro.distributions`` through it runs that subpackage twice,
  the copy kept lacking its submodules (``numpyro.factor`` then fails). ``import numpyro`` loads it properly;
- ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` unless set (GPUs only; read when the GPU backend starts): a few small fits
  need not hold 75% of the GPU's memory.

Everything else waits for :func:`setup`, which :func:`bayescale.sampler.run_nuts` calls first: the persistent
compilation cache (its directory is created then, not at import). Settings, validated like ArviZ's ``rcParams``,
take their defaults from the environment when this module is imported:

- ``cache.enabled``, ``cache.dir``: where compiled programs and traced sampling programs
  (:mod:`bayescale.programs`) are kept; ``BAYESCALE_JAX_CACHE`` is a directory, or ``off`` (also ``0``, ``none``,
  ``false``, empty); default ``~/.cache/bayescale/jax``;
- ``cache.min_compile_secs``: ``BAYESCALE_JAX_CACHE_MIN_COMPILE_SECS``, programs compiling faster are not written
  (default 0.05). A fit is three programs that compile in seconds; a prediction's draws and densities compile in about
  a tenth of a second each, and reading them back takes a few milliseconds. JAX's op-by-op programs compile faster
  than the default (hundredths of a second each, one file per shape), so they are not written;
- ``cpu.devices``: ``BAYESCALE_CPU_DEVICES``, default the usable cores, at most 8;
- ``gc.freeze``: ``BAYESCALE_GC_FREEZE`` (default on): once the first fit has imported what fits need,
  :func:`freeze_imports` moves every object then alive (mostly the libraries' modules: JAX, SciPy, pandas, xarray,
  ArviZ, several hundred thousand objects) to Python's permanent generation (:func:`gc.freeze`). The cyclic garbage
  collector then skips them in every full collection and at exit ("First answer" in ``benchmarks/RESULTS.md``).
  The cost: cyclic garbage among the objects alive at that moment is never collected (objects freed by reference
  counting are freed as usual). Once per process; ``off`` to keep Python's default;
- ``lfo.refit_draws``: ``BAYESCALE_LFO_REFIT_DRAWS`` (default 300): warm-up steps and draws per chain, at most, of
  the refits behind a fit's own leave-future-out errors (:meth:`bayescale.Fit.own_errors`; up to four refits
  per fit). They need only a mean and an sd of ln y at a few runs; the shipped error model was learned with 300;
- ``lfo.refit_chains``: ``BAYESCALE_LFO_REFIT_CHAINS`` (default 2): chains of those refits, at most. Two chains
  of 300 draws are the 600 draws a refit's errors read; their errors differ from four chains' (the fit's default)
  about as much as two seeds of four chains differ, at half the sampling (``benchmarks/own_errors.py``).

:func:`import_meanwhile` imports modules on a thread while compiled code (which holds no GIL) runs: a fit imports
its diagnostics' library so while it samples.
"""

from __future__ import annotations

import gc
import importlib
import os
import platform
import sys
import threading
from collections.abc import MutableMapping
from pathlib import Path

if "jax" not in sys.modules:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

__all__ = ["Settings", "backend", "cpu_model", "freeze_imports", "import_meanwhile", "settings", "setup",
           "usable_cores"]

_OFF = {"", "0", "off", "none", "false", "no"}


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _positive_int(value) -> int:
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(value) < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return int(value)


def _non_negative_float(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number >= 0, got {value!r}") from None
    if not out >= 0:
        raise ValueError(f"expected a number >= 0, got {value!r}")
    return out


def _boolean(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "on", "true", "yes"}:
        return True
    if text in _OFF:
        return False
    raise ValueError(f"expected a boolean, got {value!r}")


def _path(value) -> str:
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ValueError(f"expected a directory path, got {value!r}")
    return os.path.expanduser(os.fspath(value))


_VALIDATE = {"cache.enabled": _boolean, "cache.dir": _path, "cache.min_compile_secs": _non_negative_float,
             "cpu.devices": _positive_int, "gc.freeze": _boolean, "lfo.refit_draws": _positive_int,
             "lfo.refit_chains": _positive_int}


class Settings(MutableMapping):
    """bayescale's process settings: a fixed set of keys, each value validated when set (``ValueError`` if not)."""

    def __init__(self, **values):
        self._data = {}
        for key, value in values.items():
            self[key] = value
        if missing := set(_VALIDATE) - set(self._data):
            raise KeyError(f"no value for {sorted(missing)}")

    def __setitem__(self, key, value):
        if key not in _VALIDATE:
            raise KeyError(f"{key!r} is not a bayescale setting; settings are {sorted(_VALIDATE)}")
        try:
            self._data[key] = _VALIDATE[key](value)
        except ValueError as err:
            raise ValueError(f"setting {key!r}: {err}") from None

    def __getitem__(self, key):
        return self._data[key]

    def __delitem__(self, key):
        raise TypeError("settings cannot be deleted")

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __repr__(self):
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in self._data.items())})"


def _from_environment() -> Settings:
    def env(name, validate, default):
        raw = os.environ.get(name, "").strip()
        try:
            return validate(raw) if raw else default
        except ValueError as err:
            raise ValueError(f"environment variable {name}: {err}") from None

    cache = os.environ.get("BAYESCALE_JAX_CACHE")
    enabled = cache is None or cache.strip().lower() not in _OFF
    return Settings(**{
        "cache.enabled": enabled,
        "cache.dir": cache if enabled and cache is not None else os.path.join("~", ".cache", "bayescale", "jax"),
        "cache.min_compile_secs": env("BAYESCALE_JAX_CACHE_MIN_COMPILE_SECS", _non_negative_float, 0.05),
        "cpu.devices": env("BAYESCALE_CPU_DEVICES", _positive_int, min(usable_cores(), 8)),
        "gc.freeze": env("BAYESCALE_GC_FREEZE", _boolean, True),
        "lfo.refit_draws": env("BAYESCALE_LFO_REFIT_DRAWS", _positive_int, 300),
        "lfo.refit_chains": env("BAYESCALE_LFO_REFIT_CHAINS", _positive_int, 2),
    })


settings = _from_environment()

_applied: dict = {}  # what setup() and the import set, to tell it from a caller's own JAX config


def _set_cpu_devices() -> None:
    n = settings["cpu.devices"]
    current = jax.config.jax_num_cpu_devices
    if current == n or (current not in (-1, 1) and current != _applied.get("cpu.devices")):
        return  # already so, or the caller's own choice
    try:
        jax.config.update("jax_num_cpu_devices", n)
        _applied["cpu.devices"] = n
    except RuntimeError:  # JAX's backends already started: keep their device count
        pass


_set_cpu_devices()

import numpyro  # noqa: E402,F401  (the package before any of its submodules: see the module docstring)


def _set_cache() -> None:
    current = jax.config.jax_compilation_cache_dir
    if current is not None and current != _applied.get("cache.dir"):
        return  # the caller's own cache
    if not settings["cache.enabled"]:
        if current is not None:
            jax.config.update("jax_compilation_cache_dir", None)
        _applied.pop("cache.dir", None)
        return
    try:
        os.makedirs(settings["cache.dir"], exist_ok=True)
    except OSError:  # e.g. a read-only home: run without the cache
        return
    jax.config.update("jax_compilation_cache_dir", settings["cache.dir"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", settings["cache.min_compile_secs"])
    _applied["cache.dir"] = settings["cache.dir"]


def setup() -> None:
    """Apply :data:`settings` for a fit: the CPU device count (if JAX has not started) and the compilation cache.

    Idempotent and cheap; calls after a change of :data:`settings` apply the change. JAX opens its persistent cache
    at the first compilation after the directory is set, and keeps it for the process.
    """
    wanted = dict(settings)
    if _applied.get("settings") == wanted:
        return
    _set_cpu_devices()
    _set_cache()
    _applied["settings"] = wanted


def freeze_imports() -> bool:
    """Once per process, if ``settings["gc.freeze"]``: :func:`gc.freeze` (see the module docstring). A fit calls it
    when its imports are done. Returns whether it froze now."""
    if not settings["gc.freeze"] or _applied.get("gc.freeze"):
        return False
    gc.freeze()
    _applied["gc.freeze"] = True
    return True


def import_meanwhile(*modules: str) -> threading.Thread | None:
    """Import ``modules`` on a thread, started now, so that their import (Python, about 0.6 s for ArviZ's statistics)
    overlaps the loading and running of the compiled sampler, which release the GIL. Join it before the next Python
    work. A failed import is left to the later ``import`` in the main thread, which then reports it. None if
    every module is already imported."""
    todo = [m for m in modules if m not in sys.modules]

    def run():
        for module in todo:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001  (reported by the main thread's own import)
                pass

    if not todo:
        return None
    thread = threading.Thread(target=run, name=f"import {', '.join(todo)}", daemon=True)
    thread.start()
    return thread


def backend() -> str:
    """The JAX platform in use ('cpu', 'gpu', ...); starts JAX's backends."""
    return jax.default_backend()


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one), for benchmark and training records."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
