"""bayescale: calibrated Bayesian extrapolation of neural scaling laws.

Data flow: run table (:mod:`bayescale.runs`) -> law (:mod:`bayescale.laws`) -> fit (:mod:`bayescale.fit`,
NUTS in :mod:`bayescale.sampler`) -> bands (:mod:`bayescale.bands`) -> comparison and model averaging
(:mod:`bayescale.compare`).
"""

__version__ = "0.1.0"

from bayescale import _config  # noqa: F401  (float64, compilation cache; before any JAX work)
from bayescale import datasets, discrepancy
from bayescale import pfn  # noqa: F401  (amortized PFN extrapolator; Equinox loads on first use)
from bayescale.allocation import compute_optimal, plot_frontier
from bayescale.bands import Bands
from bayescale.compare import ModelAverage, compare, model_average
from bayescale.errors import BayescaleError, FitFileError, RunTableError, UnknownLawError
from bayescale.fit import Fit, FitMany, fit, fit_many, load_fit
from bayescale.laws import Input, Law, Param, Scales, get_law, list_laws, register_law
from bayescale.next_runs import next_runs
from bayescale.pymc_bridge import fit_pymc
from bayescale.report import risk_report

__all__ = [
    "Bands", "BayescaleError", "datasets", "discrepancy", "Fit", "FitFileError", "FitMany", "Input", "Law", "ModelAverage", "Param",
    "RunTableError", "Scales", "UnknownLawError", "compare", "fit", "fit_many", "fit_pymc", "get_law", "list_laws",
    "load_fit", "model_average", "register_law", "compute_optimal", "plot_frontier", "next_runs", "risk_report",
]
