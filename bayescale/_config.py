"""Process-wide JAX set-up: float64, a persistent compilation cache, quiet GPU memory use, one JAX device per core.

Imported first by ``bayescale``. It sets no XLA flags; JAX picks a GPU by itself when one is visible
(``JAX_PLATFORMS=cpu`` keeps it on the CPU, as the test suite does). On the CPU, JAX shows one device per usable
core (at most 8; ``BAYESCALE_CPU_DEVICES=n`` overrides), so NUTS chains run on all cores at once
(:mod:`bayescale.sampler`). That only works when bayescale is imported before anything initialises JAX's backends;
otherwise the chains share one device, which is slower but gives the same draws.
"""

from __future__ import annotations

import os
import sys

if "jax" not in sys.modules:
    # Only matters on a GPU: don't grab 75% of its memory for a few small fits.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _set_cpu_devices() -> None:
    want = os.environ.get("BAYESCALE_CPU_DEVICES", "")
    n = int(want) if want.strip().isdigit() and int(want) > 0 else min(_usable_cores(), 8)
    if n > 1 and jax.config.jax_num_cpu_devices in (-1, 1):
        try:
            jax.config.update("jax_num_cpu_devices", n)
        except RuntimeError:  # backends already initialised by the caller: keep what they set
            pass


_set_cpu_devices()

_cache = os.environ.get("BAYESCALE_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "bayescale", "jax"))
if _cache and _cache.lower() not in {"0", "off", "none"}:
    try:
        os.makedirs(_cache, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", _cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except OSError:  # read-only home: run without the cache
        pass

import numpyro  # noqa: E402,F401
import numpyro.distributions  # noqa: E402,F401  (loaded here so the repair below sees its submodules)


def _repair_numpyro_submodules() -> None:
    # Importing arviz before numpyro leaves numpyro.distributions without its `distribution` attribute (the
    # submodule is in sys.modules but not bound), and numpyro.factor then fails. Bind every loaded submodule.
    for name, mod in list(sys.modules.items()):
        if name.startswith("numpyro.") and mod is not None:
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and not hasattr(sys.modules[parent], child):
                setattr(sys.modules[parent], child, mod)


_repair_numpyro_submodules()


def backend() -> str:
    """The JAX platform in use ('cpu', 'gpu', ...)."""
    return jax.default_backend()


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one), for benchmark and training records."""
    import platform
    from pathlib import Path

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
