"""A law plus a noise model (:mod:`bayescale.noise`) as a NumPyro model.

The model reads one dict ``data = {"t", "y", "se", "mask", "scales"}``; padded points
(``mask`` False) drop out, which lets :func:`bayescale.fit_many` batch curves of different lengths.
"""

from __future__ import annotations

from functools import lru_cache

import jax
import numpy as np
import numpyro
import pandas as pd

from bayescale.laws import Law, get_law
from bayescale.noise import DEFAULT, check_likelihood, noise_dist, sigma_prior
from bayescale.runs import scales_for, transform_inputs

__all__ = ["batch_pad_length", "build_model", "curve_data", "pad_length"]


@lru_cache(maxsize=None)
def _build(law_name: str, law: Law, likelihood: str, df: float):
    def model(data):
        s = data["scales"]
        p = {prm.name: numpyro.sample(prm.name, prm.prior(s)) for prm in law.params}
        mu = law.mean(p, data["t"])
        sigma = numpyro.sample("sigma", sigma_prior(likelihood, s))
        with numpyro.plate("run", data["y"].shape[-1]), numpyro.handlers.mask(mask=data["mask"]):
            numpyro.sample("y", noise_dist(likelihood, mu, sigma, data["se"], data["y"], df), obs=data["y"])

    model.__name__ = f"{law_name}_{likelihood}"
    return model


def build_model(law, likelihood: str = DEFAULT, df: float = 4.0):
    """The NumPyro model of ``law`` with noise ``likelihood``; cached, so its JIT compilations are reused."""
    law = get_law(law)
    return _build(law.name, law, check_likelihood(likelihood), float(df))


def pad_length(n: int) -> int:
    """Pad curves to a few sizes so that fits of similar length reuse one compiled program."""
    return max(8, 1 << (n - 1).bit_length())


def batch_pad_length(n: int) -> int:
    """Padded length for :func:`fit_many`, where one program serves every batch: the next multiple of 8."""
    return -(-n // 8) * 8


def curve_data(law: Law, frame: pd.DataFrame, n_pad: int):
    """The model's ``data`` dict for one curve's runs padded to ``n_pad`` points (padding masked out), and its
    :class:`~bayescale.laws.Scales`."""
    scales = scales_for(law, frame)
    n = len(frame)
    t = transform_inputs(law, {k: frame[k].to_numpy() for k in law.input_names}, scales.center)
    pad = n_pad - n

    def padded(a, fill):
        return np.concatenate([np.asarray(a, float), np.full(pad, fill)])

    y = frame["y"].to_numpy(float)
    data = {
        "t": {k: padded(v, v.mean() if n else 0.0) for k, v in t.items()},
        "y": padded(y, np.median(y)),
        "se": padded(frame["se"].to_numpy(float) if "se" in frame else np.zeros(n), 0.0),
        "mask": np.concatenate([np.ones(n, bool), np.zeros(pad, bool)]),
        "scales": jax.tree.map(lambda v: np.asarray(v, float), scales),
    }
    return data, scales


