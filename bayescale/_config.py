"""Process-wide JAX set-up: float64, a persistent compilation cache, quiet GPU memory use.

Imported first by ``bayescale``. It sets no XLA flags; JAX picks a GPU by itself when one is visible
(``JAX_PLATFORMS=cpu`` keeps it on the CPU, as the test suite does).
"""

from __future__ import annotations

import os
import sys

if "jax" not in sys.modules:
    # Only matters on a GPU: don't grab 75% of its memory for a few small fits.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

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
