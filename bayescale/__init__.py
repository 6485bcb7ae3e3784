"""bayescale: calibrated Bayesian extrapolation of neural scaling laws.

Data flow: run table (:mod:`bayescale.runs`) -> law (:mod:`bayescale.laws`) -> fit (:mod:`bayescale.fit`,
NUTS in :mod:`bayescale.sampler`) -> posterior draws (:mod:`bayescale.posterior`) -> bands (:mod:`bayescale.bands`)
-> decisions (:mod:`bayescale.decisions`); ``ARCHITECTURE.md`` has the map.

Public names load their module on first use (PEP 562), so ``import bayescale`` costs little more than JAX and
NumPyro (:mod:`bayescale.config`); any submodule is also reachable as an attribute, as after an eager import.
"""

import importlib
import importlib.util
import sys
import types

__version__ = "0.1.0"

from bayescale import config  # noqa: E402  (JAX process state; before any bayescale module makes an array)

# Public name -> the submodule that defines it; a new public name is one row (a public submodule: one in _MODULES).
_WHERE = {
    "Bands": "bands",
    "BayescaleError": "errors",
    "FitFileError": "errors",
    "RunTableError": "errors",
    "UnknownLawError": "errors",
    "Fit": "fit",
    "FitMany": "fit",
    "fit": "fit",
    "fit_many": "fit",
    "load_fit": "fit",
    "Input": "laws",
    "Law": "laws",
    "Param": "laws",
    "Scales": "laws",
    "get_law": "laws",
    "list_laws": "laws",
    "register_law": "laws",
    "ModelAverage": "compare",
    "compare": "compare",
    "model_average": "compare",
    "compute_optimal": "decisions.allocation",
    "plot_frontier": "plots",
    "next_runs": "decisions.next_runs",
    "fit_pymc": "pymc_bridge",
    "risk_report": "decisions.report",
    "PosteriorDraws": "posterior",
    "posterior_draws": "posterior",
    "SettingError": "errors",
}
_MODULES = ("calibration", "config", "datasets", "decisions", "pfn", "plots", "posterior", "simulate")

__all__ = sorted([*_WHERE, *_MODULES], key=str.lower)


class _Package(types.ModuleType):
    def __setattr__(self, name, value):
        # The import system binds each submodule it loads on its package; bayescale.fit and bayescale.compare must
        # stay the functions, not become the modules of those names.
        if isinstance(value, types.ModuleType) and name in _WHERE:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")  # any submodule, e.g. bayescale.laws, as before
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_WHERE, *_MODULES})
