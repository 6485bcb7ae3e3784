"""Decisions from a posterior: how to split a compute budget, which pilot run to train next, which big run to fund.

Each asks :func:`bayescale.posterior.posterior_draws` for its draws (so a calibrated extrapolation error counts),
and works on any fit or model average. Modules, in dependency order (each imports only those above it):

- :mod:`~bayescale.decisions.isoflop`: :func:`~bayescale.decisions.isoflop.isoflop_optima`, the optima that
  isoFLOP profiles among the runs measure, and how far a law's optimum lies from them;
- :mod:`~bayescale.decisions.allocation`: :func:`compute_optimal`, the posterior of N*(C), D*(C), L*(C) solved per
  draw, under :func:`default_cost` (6ND) or any cost, checked by the runs' isoFLOP profiles where they have them
  (the frontier plot: :func:`bayescale.plots.plot_frontier`);
- :mod:`~bayescale.decisions.next_runs`: :func:`next_runs`, candidate runs ranked by expected narrowing of a
  target per unit cost (:class:`SearchOptions`);
- :mod:`~bayescale.decisions.risk`: :func:`assess_risk`, the numbers of a risk report (:class:`RiskReport`);
- :mod:`~bayescale.decisions.report`: :func:`risk_report`, those numbers computed and rendered as HTML, Markdown
  and JSON (:func:`write_report`).

Importing this package does not import matplotlib: the plotting functions load it when called.
"""

from bayescale.decisions.allocation import compute_optimal
from bayescale.decisions.isoflop import isoflop_optima
from bayescale.runs import default_cost
from bayescale.decisions.next_runs import SearchOptions, candidate_grid, next_runs, parse_target
from bayescale.decisions.report import check_in_browser, chromium, risk_report, write_report
from bayescale.decisions.risk import (RiskReport, assess_risk, check_target_loss, fit_families, format_size,
                                      parse_option, parse_size)

__all__ = ["RiskReport", "SearchOptions", "assess_risk", "candidate_grid", "check_in_browser",
           "check_target_loss", "chromium", "compute_optimal", "default_cost", "fit_families", "format_size",
           "isoflop_optima", "next_runs", "parse_option", "parse_size", "parse_target", "risk_report",
           "write_report"]
