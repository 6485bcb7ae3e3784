"""Amortized extrapolation: a prior-data fitted network (PFN) trained on synthetic scaling-law curves.

Modules, in dependency order (each imports only those above it):

- :mod:`~bayescale.pfn.prior`: the training prior (the law registry's families and priors, broken power laws with
  1-3 breaks, saturating and non-monotone curves, random noise), a pure seeded batched sampler;
- :mod:`~bayescale.pfn.network`: the Equinox transformer;
- :mod:`~bayescale.pfn.bar`: its output, the full-support bar distribution (training loss, CDF, quantiles);
- :mod:`~bayescale.pfn.recalibration`: the post-hoc recalibration map of the predictive CDF, applied by default;
- :mod:`~bayescale.pfn.weights`: the weights' file format (``.npz`` + JSON), sha256 check, save and read;
- :mod:`~bayescale.pfn.infer`: loading the bundled weights and predicting;
- :mod:`~bayescale.pfn.calibrate`: fitting the recalibration map on held-out prior draws (``bayescale pfn
  calibrate``), stored in the weights' JSON;
- :mod:`~bayescale.pfn.train`: training with optax (``bayescale pfn train --config small|base``;
  ``bayescale.pfn.train.train``).

The shipped weights' training record: ``bayescale/pfn/weights/MODEL_CARD.md``.

API: :func:`available`, :func:`predictive` (one curve -> a :class:`~bayescale.pfn.infer.Predictive` with
``quantile``, ``logpdf``, ``cdf``, ``sample``, ``median``), :func:`predictive_many` (many curves, batched),
:func:`predict` (a run table -> :class:`bayescale.Bands`, as NUTS fits give); :func:`own_errors_many` (the
network's errors on each context's later runs predicted from its earlier ones, which its extrapolation error reads).
One input x only.

Submodules load on first use, so ``import bayescale`` does not pay for Equinox.
"""

from __future__ import annotations

import importlib

__all__ = ["BarDistribution", "PFNWeightsError", "Predictive", "Recalibration", "available", "load",
           "own_errors_many", "predict", "predictive", "predictive_many", "sample_prior"]

_WHERE = {"BarDistribution": "bar", "PFNWeightsError": "weights", "Predictive": "infer",
          "Recalibration": "recalibration", "available": "infer", "load": "infer", "own_errors_many": "infer",
          "predict": "infer", "predictive": "infer", "predictive_many": "infer", "sample_prior": "prior"}


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"bayescale.pfn.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'bayescale.pfn' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_WHERE))
