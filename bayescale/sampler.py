"""NUTS for one curve or a batch of curves, compiled into one XLA program.

``numpyro.infer.MCMC.run`` drives the NUTS kernel from Python between chunks; for models this small the runtime
overhead dominates, so here the kernel (``numpyro.infer.hmc.hmc``) runs inside one jitted ``lax.scan``, vmapped
over chains and, for :func:`bayescale.fit_many`, over curves. Each chain and curve keeps its own step size and
mass matrix, so one hard curve does not slow the others' adaptation.

Initialisation: ``n_starts`` draws from the prior are each optimised (Adam on the unconstrained posterior), and the
chains start from the best distinct optima. Starting NUTS at raw prior draws gets stuck on these laws (flat
plateaus where a power-law term vanishes).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from numpyro.distributions import biject_to
from numpyro.handlers import seed, trace
from numpyro.infer.hmc import hmc
from numpyro.infer.util import constrain_fn, log_likelihood, potential_energy

__all__ = ["SamplerSettings", "run_nuts"]


@dataclass(frozen=True)
class SamplerSettings:
    """NUTS settings. ``dense_mass=None`` uses a dense mass matrix up to 12 parameters.

    ``n_starts`` prior draws are optimised for ``opt_steps`` Adam steps to start the chains; ``opt_steps=0``
    starts the chains at raw prior draws instead.
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    target_accept: float = 0.9
    max_tree_depth: int = 10
    dense_mass: bool | None = None
    n_starts: int = 16
    opt_steps: int = 400

    def __post_init__(self):
        if self.num_chains < 1 or self.num_samples < 1 or self.num_warmup < 0:
            raise ValueError("need chains >= 1, samples >= 1 and warmup >= 0")
        if self.n_starts < self.num_chains:
            raise ValueError(f"n_starts ({self.n_starts}) must be at least the number of chains ({self.num_chains})")
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must lie in (0, 1), got {self.target_accept}")


def _prior_z(model, key, data):
    """One prior draw, mapped to the unconstrained space NUTS works in."""
    tr = trace(seed(model, key)).get_trace(data)
    return {name: biject_to(site["fn"].support).inv(site["value"])
            for name, site in tr.items() if site["type"] == "sample" and not site["is_observed"]}


def _finite(v):
    return jnp.where(jnp.isfinite(v), v, jnp.inf)


def _optimize(pe, z0, steps):
    flat, unravel = ravel_pytree(z0)
    opt = optax.chain(optax.clip_by_global_norm(10.0), optax.adam(optax.cosine_decay_schedule(0.05, steps, alpha=1e-3)))

    def loss(f):
        v = pe(unravel(f))
        return jnp.where(jnp.isfinite(v), v, 1e30)

    def body(carry, _):
        f, st = carry
        v, g = jax.value_and_grad(loss)(f)
        g = jnp.where(jnp.isfinite(g), g, 0.0)
        upd, st = opt.update(g, st, f)
        return (optax.apply_updates(f, upd), st), None

    (flat, _), _ = jax.lax.scan(body, (flat, opt.init(flat)), None, length=steps)
    return unravel(flat), _finite(pe(unravel(flat)))


_BAR: dict = {}


def _progress_update(i):
    """Host callback from inside the compiled sampler: advance the current progress bar."""
    i = int(np.asarray(i).reshape(-1)[0])
    bar = _BAR.get("bar")
    if bar is None:
        from tqdm.auto import tqdm

        bar = _BAR["bar"] = tqdm(total=_BAR["total"], desc=_BAR["label"], file=sys.stderr, leave=False)
    bar.update(i + 1 - bar.n)


def _one_curve(model, settings: SamplerSettings, dense: bool, progress: bool, key, data):
    k_init, k_chain, k_jit = jax.random.split(key, 3)
    pe = partial(potential_energy, model, (data,), {})
    z0 = jax.vmap(lambda k: _prior_z(model, k, data))(jax.random.split(k_init, settings.n_starts))
    if settings.opt_steps > 0:
        z_opt, v_opt = jax.vmap(lambda z: _optimize(pe, z, settings.opt_steps))(z0)
    else:  # plain prior draws (for comparison: `benchmarks/init.py`)
        z_opt, v_opt = z0, jnp.zeros(settings.n_starts)
    order = jnp.argsort(v_opt)
    best = order[0]
    # chains start at the best optima; ones far worse than the best (another, poorer mode) start at the best
    pick = order[: settings.num_chains]
    pick = jnp.where(v_opt[pick] - v_opt[best] < 5.0, pick, best)
    flat = jax.vmap(lambda i: ravel_pytree(jax.tree.map(lambda a: a[i], z_opt))[0])(pick)
    unravel = ravel_pytree(jax.tree.map(lambda a: a[0], z_opt))[1]
    inits = jax.vmap(unravel)(flat + 0.01 * jax.random.normal(k_jit, flat.shape))

    init_kernel, sample_kernel = hmc(potential_fn=pe, algo="NUTS")
    total = settings.num_warmup + settings.num_samples

    def chain(k, z):
        st = init_kernel(z, settings.num_warmup, dense_mass=dense, target_accept_prob=settings.target_accept,
                         max_tree_depth=settings.max_tree_depth, rng_key=k)

        def step(st, i):
            st = sample_kernel(st)
            if progress:
                jax.lax.cond(i % 50 == 49, lambda: jax.debug.callback(_progress_update, i), lambda: None)
            return st, (st.z, st.diverging, st.energy, st.num_steps, st.accept_prob, st.potential_energy)

        # one scan over warm-up and sampling, so the NUTS kernel is compiled once; warm-up draws are dropped
        st, out = jax.lax.scan(step, st, jnp.arange(total))
        return jax.tree.map(lambda a: a[settings.num_warmup:], out), st.adapt_state.step_size

    (z, div, energy, nsteps, acc, pot), step_size = jax.vmap(chain)(jax.random.split(k_chain, settings.num_chains), inits)
    samples = jax.vmap(jax.vmap(lambda zz: constrain_fn(model, (data,), {}, zz)))(z)
    ll = log_likelihood(model, samples, data, batch_ndims=2)["y"]
    stats = {"diverging": div, "energy": energy, "n_steps": nsteps, "acceptance_rate": acc, "lp": -pot,
             "step_size": jnp.broadcast_to(step_size[:, None], acc.shape)}
    return samples, ll, stats, v_opt[best]


@partial(jax.jit, static_argnames=("model", "settings", "dense", "batched", "progress"))
def _run(model, settings, dense, batched, progress, keys, data):
    f = partial(_one_curve, model, settings, dense, progress)
    return jax.vmap(f)(keys, data) if batched else f(keys, data)


def run_nuts(model, data, key, settings: SamplerSettings, n_params: int, batched: bool = False,
             progress: bool | None = None, label: str = "NUTS"):
    """Sample ``model`` given ``data`` (a pytree; with ``batched`` every leaf has a leading curve axis).

    Returns numpy dicts: constrained samples (chain, draw, ...), pointwise log-likelihood, sample stats, and the
    best MAP potential found during initialisation.
    """
    dense = settings.dense_mass if settings.dense_mass is not None else n_params <= 12
    if progress is None:
        progress = sys.stderr.isatty()
    _BAR.clear()
    _BAR.update(total=settings.num_warmup + settings.num_samples, label=label)
    if batched and np.ndim(key) == 1:  # one key for the batch: split it per curve
        key = jax.random.split(key, jax.tree.leaves(data)[0].shape[0])
    try:
        out = _run(model, settings, dense, batched, bool(progress), key, data)
        out = jax.tree.map(np.asarray, out)
    finally:
        if "bar" in _BAR:
            _BAR.pop("bar").close()
    return out
