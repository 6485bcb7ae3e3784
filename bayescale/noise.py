"""Noise models: how an observed run scatters around the law's mean curve ``mu``. Written once, used by the NumPyro
model (:mod:`bayescale.model`) and by every NumPy consumer of posterior draws (:mod:`bayescale.posterior`).

``likelihood=``:

- ``"lognormal"``: multiplicative noise, ``ln y ~ Normal(ln mu, s)``; ``s`` is a relative error;
- ``"normal"``: ``y ~ Normal(mu, s)`` (y units);
- ``"studentt"``: ``y ~ StudentT(df, mu, s)``, robust to outlying runs (``df`` default 4);
- ``"logstudentt"`` (default, :data:`DEFAULT`): ``ln y ~ StudentT(df, ln mu, s)``: multiplicative like lognormal,
  robust like studentt: an outlying pilot run weighs little, so it neither tilts the exponents nor widens every band
  (on the real suites its bands are as well calibrated and its predictions more accurate: ``benchmarks/RESULTS.md``);
- ``"beta"``: bounded metrics in [0, 1] (accuracy, error rate), zeros and ones included: ``y' ~ Beta(m phi,
  (1 - m) phi)`` with ``y' = e + (1 - 2e) y`` and ``m`` the same squeeze of ``mu`` (``e`` = :data:`SQUEEZE`, as
  Smithson & Verkuilen 2006 squeeze 0/1 outcomes), ``phi = 1 / s^2 - 1``: ``s`` is the sd relative to the largest
  a Bernoulli-like metric can have, ``sd(y') = s sqrt(m (1 - m))``.

The scale ``s`` adds in quadrature the noise scale ``sigma``, a known measurement error ``se`` of the run (y units;
``se / y`` in log space, ``se / sqrt(m (1 - m))`` for beta) and an ``extra`` relative error (ln units; ``extra * mu``
in y units), e.g. the error a local fit gives a far run: ``s = sqrt(sigma^2 + se^2 + extra^2)`` in the
likelihood's own units.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from bayescale import programs

__all__ = ["Beta", "DEFAULT", "LIKELIHOODS", "LOG_SCALE", "ROBUST_ALTERNATIVE", "check_likelihood", "log_prob",
           "log_sd", "noise_dist", "sample", "sigma_prior"]

LIKELIHOODS = ("lognormal", "normal", "studentt", "logstudentt", "beta")
DEFAULT = "logstudentt"  # bs.fit's noise model unless told otherwise
LOG_SCALE = ("lognormal", "logstudentt")  # noise on ln y: y > 0, s relative
# the heavy-tailed likelihood on the same scale, under which an outlying run weighs little
ROBUST_ALTERNATIVE = {"lognormal": "logstudentt", "normal": "studentt"}
SQUEEZE = 1e-3  # beta noise: outcomes 0 and 1 sit this far inside (0, 1)
MAX_REL_SD = 0.99  # beta noise: s below 1 keeps phi > 0
TINY = 1e-300  # floor of mu under ln, so a law that reaches 0 gives a finite (very unlikely) density


def check_likelihood(likelihood: str) -> str:
    """``likelihood`` if it is one of :data:`LIKELIHOODS`, else a ValueError naming them."""
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {likelihood!r}; choose one of {LIKELIHOODS}")
    return likelihood


def sigma_prior(likelihood: str, scales):
    """Noise scale: half-normal, 0.1 relative (log space), 0.2 of the largest sd (beta) or 0.1 of the typical y
    (``scales.y_med``)."""
    if likelihood == "beta":
        return dist.HalfNormal(0.2)
    return dist.HalfNormal(0.1) if likelihood in LOG_SCALE else dist.HalfNormal(0.1 * scales.y_med)


def noise_dist(likelihood: str, mu, sigma, se=None, y_ref=None, df: float = 4.0, extra=None):
    """Distribution of an observed run around mean ``mu`` (a NumPyro distribution; JAX or NumPy arrays).

    ``se``: known measurement error (y units; ``y_ref`` is the y it is relative to in log space); ``extra``: a
    relative error (ln units). Both add to ``sigma`` in quadrature (see the module docstring).
    """
    var = sigma**2
    if likelihood == "beta":
        m = SQUEEZE + (1 - 2 * SQUEEZE) * jnp.clip(mu, 0.0, 1.0)
        if se is not None:
            var = var + se**2 / (m * (1 - m))
        if extra is not None:
            var = var + extra**2
        phi = 1.0 / jnp.minimum(var, MAX_REL_SD**2) - 1.0
        unsqueeze = dist.transforms.AffineTransform(-SQUEEZE / (1 - 2 * SQUEEZE), 1.0 / (1 - 2 * SQUEEZE))
        return dist.TransformedDistribution(Beta(m * phi, (1 - m) * phi), unsqueeze)
    if likelihood in LOG_SCALE:
        if se is not None:
            var = var + (se / y_ref) ** 2
        if extra is not None:
            var = var + extra**2
        loc = jnp.log(jnp.maximum(mu, TINY))
        if likelihood == "lognormal":
            return dist.LogNormal(loc, jnp.sqrt(var))
        return dist.TransformedDistribution(_student_t(df, loc, jnp.sqrt(var)), dist.transforms.ExpTransform())
    if se is not None:
        var = var + se**2
    if extra is not None:
        var = var + (extra * mu) ** 2
    sd = jnp.sqrt(var)
    return dist.Normal(mu, sd) if likelihood == "normal" else _student_t(df, mu, sd)


class _FixedDfStudentT(dist.StudentT):
    """A Student-t whose ``df`` is a number: its normalising constant
    ``ln Gamma((df + 1) / 2) - ln Gamma(df / 2) - ln(df pi) / 2`` is computed once on the host, not in the compiled
    program (where XLA expands each ln Gamma into hundreds of operations in a saved program, seconds of compile)."""

    pytree_aux_fields = ("log_norm",)

    def __init__(self, df: float, loc, scale):
        self.log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
        super().__init__(df, loc, scale)

    def log_prob(self, value):
        z = (value - self.loc) / self.scale
        return self.log_norm - jnp.log(self.scale) - 0.5 * (self.df + 1.0) * jnp.log1p(z**2 / self.df)


def _lgamma(x):
    """ln Gamma(x) for x > 0: Stirling's series at z = x + 6 and the recurrence down to x,
    ``ln Gamma(x) = ln Gamma(z) - sum_{k<6} ln(x + k)`` (error within a few float64 roundings, its first two derivatives
    too). A few dozen operations, where XLA expands ``lax.lgamma`` in a saved program, and its derivatives (digamma,
    trigamma) each, into hundreds (a first beta-noise fit: ``benchmarks/cold_fit.py``)."""
    z = x + 6.0
    shift = sum(jnp.log(x + k) for k in range(6))
    r = 1.0 / (z * z)
    series = (1 / 12 - r * (1 / 360 - r * (1 / 1260 - r * (1 / 1680 - r / 1188)))) / z
    return (z - 0.5) * jnp.log(z) - z + 0.5 * math.log(2 * math.pi) + series - shift


class Beta(dist.Beta):
    """A Beta distribution without ``lax.lgamma`` in its density: ``ln B(a, b)`` computed once on the host
    (``math.lgamma``) where ``a`` and ``b`` are numbers (a law's prior), else with :func:`_lgamma` (beta noise). In a
    saved program XLA expands ``lax.lgamma`` into hundreds of operations: with NumPyro's Beta as its prior, a first
    Kaplan fit took twice as long (``benchmarks/cold_fit.py``)."""

    pytree_aux_fields = ("log_beta",)

    def __init__(self, concentration1, concentration0, *, validate_args=None):
        numbers = all(isinstance(c, (int, float, np.number)) for c in (concentration1, concentration0))
        self.log_beta = (math.lgamma(concentration1) + math.lgamma(concentration0)
                         - math.lgamma(concentration1 + concentration0)) if numbers else None
        super().__init__(concentration1, concentration0, validate_args=validate_args)

    def log_prob(self, value):
        a, b = self.concentration1, self.concentration0
        log_beta = self.log_beta if self.log_beta is not None else _lgamma(a) + _lgamma(b) - _lgamma(a + b)
        return (a - 1) * jnp.log(value) + (b - 1) * jnp.log1p(-value) - log_beta


def _student_t(df, loc, scale):
    """A Student-t, with its normalising constant computed on the host where ``df`` is a number (a fit's model)."""
    if isinstance(df, (int, float, np.number)):
        return _FixedDfStudentT(float(df), loc, scale)
    return dist.StudentT(df, loc, scale)


# one compiled program per likelihood and length (:func:`_chunked`): run op by op, each of a distribution's dozens
# of operations would be compiled on its own (about a second in all for a first prediction); kept traced on disk
# (bayescale.programs), so that a new process does not trace and lower them again
@functools.partial(jax.jit, static_argnames="likelihood")
def _log_prob(likelihood, df, chunk, y, mu, sigma, errors):
    """``chunk`` unused: :func:`_by_chunk` gives every program its chunk's index (the sampler folds it into its key)."""
    return noise_dist(likelihood, mu, sigma, df=df, **errors).log_prob(y)


@functools.partial(jax.jit, static_argnames="likelihood")
def _sample(likelihood, key, df, chunk, mu, sigma, errors):
    return noise_dist(likelihood, mu, sigma, df=df, **errors).sample(jax.random.fold_in(key, chunk))


SMALL, CHUNK = 4096, 16384  # the two lengths the noise programs are compiled for (SMALL: a default fit's 4000 draws)


def _chunked(*arrays) -> tuple[list, tuple, int]:
    """``arrays`` (None kept) broadcast together, flattened and padded with their last value to :data:`SMALL`
    elements or to whole chunks of :data:`CHUNK` (rows of a 2-d array), with their common shape and size: two
    compiled programs per noise model serve every shape a prediction asks (a Student-t sampler is over a second of
    compile, and about 1 us per element to run)."""
    given = [np.asarray(a, np.float64) for a in arrays if a is not None]
    shape = np.broadcast_shapes(*(a.shape for a in given))
    size = math.prod(shape)
    width = SMALL if size <= SMALL else CHUNK
    room = width * max(1, -(-size // width))
    flat = iter([np.pad(np.broadcast_to(a, shape).ravel(), (0, room - size), mode="edge").reshape(-1, width)
                 if size else np.ones((1, width)) for a in given])
    return [None if a is None else next(flat) for a in arrays], shape, size


def _by_chunk(fn, tag: str, lead: tuple, arrays: tuple, errors: dict) -> np.ndarray:
    """``fn(*lead, i, *row i of arrays, row i of errors)`` for each chunk ``i`` of the :func:`_chunked` ``arrays``
    and ``errors``, through the saved program of ``tag``; the first elements, in the arrays' broadcast shape."""
    names = sorted(errors)
    rows, shape, size = _chunked(*arrays, *(errors[k] for k in names))
    rows, err = rows[:len(arrays)], dict(zip(names, rows[len(arrays):]))
    out = [programs.call(fn, tag, *lead, np.int32(i), *(a[i] for a in rows),
                         {k: None if v is None else v[i] for k, v in err.items()}) for i in range(len(rows[0]))]
    return np.concatenate([np.asarray(o) for o in out])[:size].reshape(shape)


def log_prob(likelihood: str, y, mu, sigma, df: float = 4.0, **errors) -> np.ndarray:
    """``log p(y | mu, sigma)`` as a NumPy array (arguments broadcast); ``errors``: ``se``/``y_ref``/``extra``."""
    return _by_chunk(functools.partial(_log_prob, likelihood), f"noise.log_prob|{likelihood}", (np.float64(df),),
                     (y, mu, sigma), errors)


def sample(likelihood: str, mu, sigma, seed, df: float = 4.0, **errors) -> np.ndarray:
    """One new run per element of ``mu`` (broadcast with ``sigma`` and ``errors``) as a NumPy array; ``seed``: an
    int or a ``numpy.random.Generator`` (a JAX key is drawn from it). Beta noise: runs in [0, 1], exact 0s and 1s
    included."""
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(2**31))
    lead = (np.asarray(jax.random.PRNGKey(seed)), np.float64(df))
    y = _by_chunk(functools.partial(_sample, likelihood), f"noise.sample|{likelihood}", lead, (mu, sigma), errors)
    return np.clip(y, 0.0, 1.0) if likelihood == "beta" else y  # the squeeze's margin maps to 0 and 1


def log_sd(likelihood: str, mu, sigma, df: float = 4.0) -> np.ndarray:
    """Approximate sd of ``ln y`` around ``ln mu`` under the noise model (delta method off the log scale):
    ``sigma`` (lognormal), ``sigma / mu`` (normal), ``sigma sqrt((1 - m) / m)`` (beta, ``m`` the squeezed mean);
    the Student-t likelihoods (log-Student-t, Student-t) times ``sqrt(df / (df - 2))``, capped at 3 (for
    ``df <= 2.25``)."""
    mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
    if likelihood in LOG_SCALE:
        s = np.broadcast_to(sigma, np.broadcast_shapes(mu.shape, sigma.shape))
        return s if likelihood == "lognormal" else s * _t_sd(df)
    if likelihood == "beta":
        m = SQUEEZE + (1 - 2 * SQUEEZE) * np.clip(mu, 0.0, 1.0)
        return sigma * np.sqrt((1 - m) / m)
    rel = sigma / np.maximum(np.abs(mu), TINY)
    return rel if likelihood == "normal" else rel * _t_sd(df)


def _t_sd(df: float) -> float:
    """sd of a unit-scale Student-t, ``sqrt(df / (df - 2))``, capped at 3 (infinite for ``df <= 2``)."""
    return min(np.sqrt(df / (df - 2)) if df > 2.25 else 3.0, 3.0)
