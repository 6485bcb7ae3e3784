"""The PFN's training prior: synthetic learning curves, one pure, seeded, batched function.

One source of truth. Every one-input, log-scale family of the law registry (:mod:`bayescale.laws`: M1-M4,
BNSL1, BNSL2, sigmoid) is drawn from *its own* parameter priors (``Param.prior``) and mean function
(``Law.mean``), with the NUTS models' own noise prior and likelihood (:func:`bayescale.noise.sigma_prior`,
:func:`bayescale.noise.noise_dist`, multiplicative noise). Added to those:

- a three-break broken power law, built by the registry's own BNSL constructor (``laws.bnsl_law(3)``), so the
  broken laws cover 1-3 breaks; the breaks' smoothness prior (``f ~ LogNormal(ln 0.5, 1)``) spans sharp and
  smooth breaks;
- a share of non-monotone curves: a Gaussian bump in ln y over ln x (double-descent-like) added to any family;
- a wider spread of noise levels: the registry's ``sigma ~ HalfNormal(0.1)`` is multiplied by ``10^U(-1.5, 0)``
  for half of the curves, because real curves are often much smoother than the NUTS prior's typical noise.

The registry's priors are scaled by the data (:class:`bayescale.laws.Scales`: the centre and span of the runs'
ln x, the median/min/max of y). For generation the x scales come from each curve's own context points (as a
NUTS fit to those points would compute them) and the y scales are drawn: ``y_med = 1`` (the PFN normalises y, so
the absolute level does not matter), ``y_min = exp(-U(0.05, 1.5))``, ``y_max = exp(U(0.05, 1.5))``; bounded-metric
families (y range within [0, 1]) draw ``y_med ~ U(0.1, 0.9)`` instead.

Inputs: x positions are ln x on a grid spanning ``U(0.7, 5)`` decades, evenly spaced (jittered) or sorted
uniform, with a random share of points dropped. Context/target splits are of two kinds: a *prefix*
(extrapolation: context = points below a random cut, targets = the rest) and a *random subset* (interpolation,
the case of active learning). At least ``min_context`` points are always context.

Input transform (:func:`normalize`): ``u = (ln x - min ln x_ctx) / (max ln x_ctx - min ln x_ctx)``, so the
context spans [0, 1] in log x and extrapolation lies at u > 1 (log x is natural for scaling laws; NSL-PFN used
linear min-max x on [0.01, 1], which squeezes the small runs together). Output transform:
``z = (ln y - mean ln y_ctx) / sd ln y_ctx``, fitted on context values only, never on the points to predict.

Everything here is float64; the network trains in float32 on the normalised values.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayescale.laws import Input, Law, Scales, bnsl_law, external_law, list_laws
from bayescale.noise import noise_dist, sigma_prior

__all__ = ["FAMILIES", "family_laws", "family_model", "normalize", "sample_batch", "sample_prior", "MIN_CONTEXT",
           "SD_FLOOR"]

MIN_CONTEXT = 3
RUN_TABLE = external_law("pfn", "y ~ PFN(x)", (Input("x", "training data size, model size or compute"),),
                         description="the runs a PFN reads: one log-scale input x, y > 0", min_points=MIN_CONTEXT)
SD_FLOOR = 1e-3  # floor of the context sd of ln y (a flat context would otherwise divide by ~0)
Z_CLIP = 30.0  # normalised targets are clipped to +-Z_CLIP for training only (prior tails far beyond any data)
BUMP_SHARE = 0.15
WIDE_NOISE_SHARE = 0.5
PREFIX_SHARE = 0.7
SPLITS = ("prefix", "random", "mixed")  # context kinds: extrapolation, interpolation, 70% prefix


def family_laws() -> tuple[Law, ...]:
    """Registry laws with one log-scale input (in registry order), then the three-break BNSL."""
    laws = [law for law in list_laws() if len(law.inputs) == 1 and law.inputs[0].scale == "log"]
    return tuple(laws) + (bnsl_law(3),)


FAMILIES = tuple(law.name for law in family_laws())


def _draw(d, key, batch):
    """One draw per curve from a (possibly curve-batched) NumPyro distribution -> (batch,)."""
    shape = (batch,) if tuple(d.batch_shape) == () else ()
    return jnp.broadcast_to(d.sample(key, shape), (batch,))


# drawn y scales (module docstring): y_med of bounded metrics, ln(y_med / y_min), ln(y_max / y_med)
Y_MED_BOUNDED = (0.1, 0.9)
LOG_DOWN = (0.05, 1.5)


def _bounded(law: Law) -> bool:
    return law.y_range[1] <= 1.0


def _log_up(law: Law) -> tuple[float, float]:
    return (0.05, 1.0) if _bounded(law) else (0.05, 1.5)


def _make_scales(law: Law, y_med, down, up, lo, hi) -> Scales:
    y_max = y_med * jnp.exp(up)
    name = law.inputs[0].name
    return Scales(y_min=y_med * jnp.exp(-down), y_max=jnp.minimum(y_max, 0.99) if _bounded(law) else y_max,
                  y_med=y_med, center={name: jnp.zeros_like(lo)}, lo={name: lo}, hi={name: hi})


def _ctx_range(tc, ctx):
    big = 1e9
    return jnp.min(jnp.where(ctx, tc, big), axis=-1), jnp.max(jnp.where(ctx, tc, -big), axis=-1)


def _scales(law: Law, key, tc, ctx):
    """Scales of each curve: x from its context points (centred t), y drawn (see the module docstring)."""
    batch = tc.shape[0]
    lo, hi = _ctx_range(tc, ctx)
    k1, k2, k3 = jax.random.split(key, 3)
    y_med = (jax.random.uniform(k1, (batch,), minval=Y_MED_BOUNDED[0], maxval=Y_MED_BOUNDED[1]) if _bounded(law)
             else jnp.ones(batch))
    down = jax.random.uniform(k2, (batch,), minval=LOG_DOWN[0], maxval=LOG_DOWN[1])
    up = jax.random.uniform(k3, (batch,), minval=_log_up(law)[0], maxval=_log_up(law)[1])
    return _make_scales(law, y_med, down, up, lo, hi)


def family_model(family: str):
    """NumPyro model of one family's curves exactly as :func:`sample_prior` draws them with ``bump_share=0`` and
    ``wide_noise_share=0``: the same drawn y scales (latent here), the law's priors given those scales, the
    NUTS noise prior and multiplicative noise, centring at the mean context ln x.

    ``model(t, ctx, y=None)``: ``t`` ln x of every point (L,), ``ctx`` a boolean mask (L,) of the observed ones,
    ``y`` (L,) whose context entries are observed (others are ignored). Records ``mu`` (L,) at every point, so
    NUTS on it gives the exact posterior predictive that a PFN trained on that prior approximates.
    """
    laws = {law.name: law for law in family_laws()}
    if family not in laws:
        raise ValueError(f"unknown prior family {family!r}; choose from {list(laws)}")
    law = laws[family]
    ref = Scales(y_min=1.0, y_max=1.0, y_med=1.0, center={}, lo={}, hi={})

    def model(t, ctx, y=None):
        t, ctx = jnp.asarray(t), jnp.asarray(ctx, bool)
        tc = t - jnp.sum(jnp.where(ctx, t, 0.0)) / jnp.sum(ctx)
        lo, hi = _ctx_range(tc, ctx)
        y_med = numpyro.sample("y_med", dist.Uniform(*Y_MED_BOUNDED)) if _bounded(law) else jnp.ones(())
        down = numpyro.sample("log_down", dist.Uniform(*LOG_DOWN))
        up = numpyro.sample("log_up", dist.Uniform(*_log_up(law)))
        s = _make_scales(law, y_med, down, up, lo, hi)
        p = {prm.name: numpyro.sample(prm.name, prm.prior(s)) for prm in law.params}
        mu = numpyro.deterministic("mu", law.mean(p, {law.inputs[0].name: tc}))
        sigma = numpyro.sample("sigma", sigma_prior("lognormal", ref))
        obs = None if y is None else jnp.where(ctx, jnp.asarray(y), 1.0)
        with numpyro.handlers.mask(mask=ctx):
            numpyro.sample("y", noise_dist("lognormal", mu, sigma), obs=obs)

    return model


def law_curves(law: Law, key, tc, ctx):
    """Noise-free curves mu (batch, L) of ``law`` at centred ln x ``tc``, parameters from the law's priors."""
    batch = tc.shape[0]
    ks, kp = jax.random.split(key)
    s = _scales(law, ks, tc, ctx)
    keys = jax.random.split(kp, len(law.params))
    p = {prm.name: _draw(prm.prior(s), k, batch)[:, None] for prm, k in zip(law.params, keys)}
    return law.mean(p, {law.inputs[0].name: tc}), s


def _grid(key, batch, n):
    """ln x positions (batch, n), sorted, starting at 0, and the valid mask."""
    k = jax.random.split(key, 5)
    span = jax.random.uniform(k[0], (batch, 1), minval=0.7, maxval=5.0) * math.log(10)
    even = jnp.linspace(0.0, 1.0, n)[None, :] + jax.random.uniform(k[1], (batch, n), minval=-0.3, maxval=0.3) / n
    unif = jnp.sort(jax.random.uniform(k[2], (batch, n)), axis=1)
    use_even = jax.random.uniform(k[3], (batch, 1)) < 0.5
    pos = jnp.sort(jnp.where(use_even, even, unif), axis=1)
    pos = (pos - pos[:, :1]) / jnp.maximum(pos[:, -1:] - pos[:, :1], 1e-9)
    keep = jax.random.uniform(k[4], (batch, 1), minval=0.4, maxval=1.0)
    valid = jax.random.uniform(jax.random.fold_in(k[4], 1), (batch, n)) < keep
    return pos * span, valid


def _split(key, t, valid, split):
    """Context mask: a prefix (ln x below a cut; the first MIN_CONTEXT points always in) or a random subset;
    ``split`` the index of the kind in :data:`SPLITS` (an input of the compiled sampler: one program serves all)."""
    batch, n = t.shape
    k1, k2, k3 = jax.random.split(key, 3)
    rank = jnp.cumsum(valid, axis=1) - 1
    span = jnp.max(jnp.where(valid, t, 0.0), axis=1, keepdims=True)
    cut = jax.random.uniform(k1, (batch, 1), minval=0.25, maxval=0.9) * span
    prefix = t <= cut
    rate = jax.random.uniform(k2, (batch, 1), minval=0.1, maxval=0.9)
    subset = jax.random.uniform(k3, (batch, n)) < rate
    # a prefix always holds the first MIN_CONTEXT points; a random subset holds MIN_CONTEXT random ones (so that
    # interpolation also covers the smallest x)
    prio = jnp.where(valid, jax.random.uniform(jax.random.fold_in(k3, 11), (batch, n)), 2.0)
    random_rank = jnp.argsort(jnp.argsort(prio, axis=1), axis=1)
    prefix = prefix | (rank < MIN_CONTEXT)
    subset = subset | (random_rank < MIN_CONTEXT)
    mixed = jnp.where(jax.random.uniform(jax.random.fold_in(k1, 7), (batch, 1)) < PREFIX_SHARE, prefix, subset)
    pick = jnp.where(split == 0, prefix, jnp.where(split == 1, subset, mixed))
    return valid & pick


def sample_batch(key, batch, n_points, split, families, bump_share, wide_noise_share):
    """:func:`sample_prior` without its argument checks, for use inside a jitted step: ``key`` a JAX PRNG key,
    ``split`` one of :data:`SPLITS`, ``families`` a tuple of names from :func:`check_families`, the rest hashable
    (they are static)."""
    return _sample_batch(key, jnp.int32(SPLITS.index(split)), batch, n_points, families, bump_share, wide_noise_share)


@partial(jax.jit, static_argnames=("batch", "n_points", "families", "bump_share", "wide_noise_share"))
def _sample_batch(key, split, batch, n_points, families, bump_share, wide_noise_share):
    laws = [law for law in family_laws() if law.name in families]
    kg, ks, kf, kb, kn, kl = jax.random.split(key, 6)
    t, valid = _grid(kg, batch, n_points)
    ctx = _split(ks, t, valid, split)
    n_ctx = jnp.sum(ctx, axis=1, keepdims=True)
    center = jnp.sum(jnp.where(ctx, t, 0.0), axis=1, keepdims=True) / n_ctx
    tc = t - center
    fam = jax.random.randint(kf, (batch,), 0, len(laws))
    lkeys = jax.random.split(kl, len(laws))
    mus = []
    for law, k in zip(laws, lkeys):
        mu, _ = law_curves(law, k, tc, ctx)
        mus.append(mu)
    mus = jnp.stack(mus)  # (F, batch, L)
    mu = jnp.take_along_axis(mus, fam[None, :, None], axis=0)[0]
    # bumps: ln y += h exp(-(t - tb)^2 / 2w^2), anywhere from the context to the far end
    b = jax.random.split(kb, 4)
    span = jnp.max(jnp.where(valid, t, 0.0), axis=1, keepdims=True)
    tb = jax.random.uniform(b[0], (batch, 1)) * span - center
    w = span * jax.random.uniform(b[1], (batch, 1), minval=0.04, maxval=0.25)
    h = jax.random.uniform(b[2], (batch, 1), minval=0.05, maxval=0.7)
    bumped = jax.random.uniform(b[3], (batch, 1)) < bump_share
    mu = mu * jnp.exp(jnp.where(bumped, h * jnp.exp(-0.5 * ((tc - tb) / w) ** 2), 0.0))
    # fall back to the first family's curve where a draw is not finite/positive or out of any sane range
    ok = jnp.all(jnp.where(valid, jnp.isfinite(mu) & (mu > 1e-12) & (mu < 1e12), True), axis=1)
    mu = jnp.where(ok[:, None], mu, jnp.abs(mus[0]) + 1e-3)
    # noise: the NUTS models' prior and likelihood (multiplicative), half of it shrunk by up to 1.5 decades
    n = jax.random.split(kn, 3)
    ref = Scales(y_min=1.0, y_max=1.0, y_med=1.0, center={}, lo={}, hi={})
    sigma = sigma_prior("lognormal", ref).sample(n[0], (batch, 1))
    shrink = jnp.where(jax.random.uniform(n[1], (batch, 1)) < wide_noise_share,
                       10.0 ** jax.random.uniform(jax.random.fold_in(n[1], 1), (batch, 1), minval=-1.5, maxval=0.0), 1.0)
    sigma = sigma * shrink
    y = noise_dist("lognormal", mu, sigma).sample(n[2])
    return {"t": t, "y": y, "mu": mu, "valid": valid, "ctx": ctx, "target": valid & ~ctx,
            "family": fam, "bump": bumped[:, 0], "sigma": sigma[:, 0]}


def check_families(families=None) -> tuple[str, ...]:
    """The chosen prior families in registry order (all for None); raises ValueError naming unknown ones."""
    fams = FAMILIES if families is None else tuple(families)
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown or not fams:
        raise ValueError(f"unknown prior families {unknown}; choose from {list(FAMILIES)}")
    return tuple(f for f in FAMILIES if f in fams)


def sample_prior(seed, batch: int, n_points: int = 48, *, split: str = "mixed", families=None,
                 bump_share: float = BUMP_SHARE, wide_noise_share: float = WIDE_NOISE_SHARE) -> dict:
    """Draw ``batch`` synthetic curves of ``n_points`` positions each (pure: same seed, same curves).

    ``seed``: an int or a JAX PRNG key. ``split``: ``"prefix"`` (extrapolation), ``"random"`` (interpolation)
    or ``"mixed"`` (70% prefix). ``families``: names from :data:`FAMILIES` (default all). Returns a dict of
    float64 arrays (JAX): ``t`` (ln x, batch x n_points), ``y`` (observed, > 0), ``mu`` (noise-free curve),
    boolean masks ``valid``, ``ctx`` (context) and ``target`` (valid and not context), and per curve ``family``
    (index into the chosen families), ``bump`` and ``sigma`` (noise sd of ln y).
    """
    if batch < 1 or n_points < MIN_CONTEXT + 1:
        raise ValueError(f"sample_prior needs batch >= 1 and n_points >= {MIN_CONTEXT + 1}; got {batch}, {n_points}")
    if split not in SPLITS:
        raise ValueError(f"split must be 'prefix', 'random' or 'mixed', got {split!r}")
    fams = check_families(families)
    key = jax.random.PRNGKey(seed) if isinstance(seed, (int, np.integer)) else seed
    return sample_batch(key, int(batch), int(n_points), split, fams, float(bump_share), float(wide_noise_share))


def normalize(t, y, ctx, xp=jnp):
    """(u, z, stats): min-max ln x and standardised ln y, both fitted on the context points only.

    ``t`` is ln x, ``y`` > 0, ``ctx`` the context mask, all (..., L). ``stats`` = (t0, tspan, m, s) per curve,
    shaped (..., 1), so ``ln y = m + s z`` and ``ln x = t0 + tspan u``.
    """
    big = 1e30
    t0 = xp.min(xp.where(ctx, t, big), axis=-1, keepdims=True)
    t1 = xp.max(xp.where(ctx, t, -big), axis=-1, keepdims=True)
    tspan = xp.maximum(t1 - t0, 1e-6)
    u = (t - t0) / tspan
    ly = xp.log(xp.where(y > 0, y, 1.0))
    n = xp.sum(ctx, axis=-1, keepdims=True)
    m = xp.sum(xp.where(ctx, ly, 0.0), axis=-1, keepdims=True) / n
    var = xp.sum(xp.where(ctx, (ly - m) ** 2, 0.0), axis=-1, keepdims=True) / n
    s = xp.maximum(xp.sqrt(var), SD_FLOOR)
    z = (ly - m) / s
    return u, z, (t0, tspan, m, s)
