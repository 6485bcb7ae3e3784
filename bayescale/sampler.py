"""NUTS for one curve or a batch of curves, compiled into one XLA program.

``numpyro.infer.MCMC.run`` drives the NUTS kernel from Python between chunks; for models this small the runtime
overhead dominates, so here the kernel (``numpyro.infer.hmc.hmc``) runs inside one jitted loop, vmapped over
curves for :func:`bayescale.fit_many` and over chains on an accelerator or in a batch. The warm-up length, the
draws, the chains and the target acceptance are inputs of that program, not constants traced into it (the
warm-up's adaptation is :mod:`bayescale.adaptation`): a single curve's program has room for the default fit's 4
chains and 1000 draws, so a quick fit and the refits behind a fit's own errors run in the default fit's compiled
program (one compile, seconds, in a new user's first process) and give its first chains and draws. Each chain and
curve keeps its own step size and mass matrix, so one hard curve does not slow the others' adaptation. On a CPU with
several JAX devices (one per core, see :mod:`bayescale.config`) the chains are split across the devices
(``shard_map``): vmapped chains move in lock step, each iteration costing the longest trajectory among them, and
one core runs one program at a time, so separate devices both use every core and cut the lock step
(``benchmarks/speed.py``). A single curve on CPUs runs each device's chains one after another:
tracing a vmapped NUTS loop takes seconds, more than sampling a small model, and a persistent compilation cache
cannot skip tracing (``benchmarks/first_answer.py``). The draws depend on the number of devices and on whether
chains are vectorised through floating-point rounding alone, which long NUTS runs can amplify into other draws of
the same posterior; the same setting gives the same draws bit for bit.

Initialisation: ``n_starts`` draws from the prior are each optimised (Adam on the unconstrained posterior), and the
chains start from the best distinct optima. Starting NUTS at raw prior draws gets stuck on these laws (flat
plateaus where a power-law term vanishes).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from numpyro.distributions import biject_to
from numpyro.handlers import seed, trace
from numpyro.infer.hmc import hmc
from jax.sharding import Mesh, PartitionSpec
from numpyro.infer.util import constrain_fn, log_likelihood, potential_energy

from bayescale import adaptation, config, programs

__all__ = ["SamplerSettings", "prior_draw", "run_nuts"]


@dataclass(frozen=True)
class SamplerSettings:
    """NUTS settings. ``dense_mass=None`` uses a dense mass matrix up to 12 parameters.

    ``n_starts`` prior draws are optimised for ``opt_steps`` Adam steps to start the chains; ``opt_steps=0``
    starts the chains at raw prior draws instead. ``laplace_mass`` starts each chain's mass-matrix adaptation at the
    inverse Hessian of the potential at its starting optimum (the Laplace covariance) instead of the identity.
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    target_accept: float = 0.9
    max_tree_depth: int = 10
    dense_mass: bool | None = None
    n_starts: int = 16
    opt_steps: int = 400
    laplace_mass: bool = True

    @classmethod
    def for_law(cls, law=None, chains: int = 4, warmup: int = 1000, samples: int = 1000, **kw) -> "SamplerSettings":
        """Settings for fitting ``law``: its own ``target_accept`` applies unless ``kw`` gives one."""
        if law is not None:
            kw.setdefault("target_accept", law.target_accept)
        return cls(num_chains=chains, num_warmup=warmup, num_samples=samples, **kw)

    def __post_init__(self):
        if self.num_chains < 1 or self.num_samples < 1 or self.num_warmup < 0:
            raise ValueError("need chains >= 1, samples >= 1 and warmup >= 0")
        if self.n_starts < self.num_chains:
            raise ValueError(f"n_starts ({self.n_starts}) must be at least the number of chains ({self.num_chains})")
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must lie in (0, 1), got {self.target_accept}")


def prior_draw(model, key, data):
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


def _laplace(pe, z):
    """Covariance of the Laplace approximation at ``z`` (inverse Hessian of ``pe``, flattened): (dense, diagonal,
    a square root S with S S^T = covariance).

    Curvature eigenvalues are clipped to [1e-2, 1e10] (sd between 1e-5 and 10 per direction) and non-positive or
    non-finite ones (a saddle or a flat direction) replaced by 1, the identity's value.
    """
    flat, unravel = ravel_pytree(z)
    h = jax.hessian(lambda f: pe(unravel(f)))(flat)
    w, v = jnp.linalg.eigh(0.5 * (h + h.T))
    good = jnp.all(jnp.isfinite(h)) & jnp.all(jnp.isfinite(w))
    w = jnp.where(good & (w > 0), jnp.clip(w, 1e-2, 1e10), 1.0)
    v = jnp.where(good, v, jnp.eye(flat.size))
    sqrt = v / jnp.sqrt(w)
    cov = sqrt @ sqrt.T
    return cov, jnp.diag(cov), sqrt


_BAR: dict = {}


def _progress_update(i):
    """Host callback from inside the compiled sampler: advance the current progress bar."""
    i = int(np.asarray(i).reshape(-1)[0])
    bar = _BAR.get("bar")
    if bar is None:
        from tqdm.auto import tqdm

        bar = _BAR["bar"] = tqdm(total=_BAR["total"], desc=_BAR["label"], file=sys.stderr, leave=False)
    bar.update(i + 1 - bar.n)


def chain_devices(num_chains: int) -> int:
    """How many JAX devices the chains are split across: the most CPU devices that divide ``num_chains``."""
    if jax.default_backend() != "cpu":
        return 1  # one accelerator runs the vmapped chains
    n = min(jax.local_device_count(), num_chains)
    return max(d for d in range(1, n + 1) if num_chains % d == 0)


ROOM_DRAWS = SamplerSettings.num_samples


class _Counts(NamedTuple):
    """The lengths of a run, inputs of its compiled program (:func:`run_nuts`): warm-up and adaptation
    (:func:`bayescale.adaptation.schedule`), draws kept per chain, chains run."""

    plan: adaptation.Schedule
    num_samples: np.ndarray
    num_chains: np.ndarray


def _room(settings: SamplerSettings, batched: bool) -> tuple[int, int, int]:
    """The chains and draws per chain a compiled program has room for, and the devices its chains are split across.

    A single curve's program holds at least the default fit's chains and draws (rounded up to whole chains per
    device and to thousands of draws), so that a fit with fewer (a quick fit, the refits behind a fit's own errors)
    runs in the default fit's program: one program to compile and load instead of one per setting. A batch's
    holds exactly its settings' chains and draws (its output, for every curve, would grow with the room).
    """
    if batched:
        return settings.num_chains, settings.num_samples, chain_devices(settings.num_chains)
    chains = max(settings.num_chains, SamplerSettings.num_chains)
    per_device = min(chains, jax.local_device_count()) if jax.default_backend() == "cpu" else 1
    chains = per_device * -(-chains // per_device)
    return chains, ROOM_DRAWS * -(-settings.num_samples // ROOM_DRAWS), chain_devices(chains)


def _starts(model, settings: SamplerSettings, num_chains: int, key, data):
    """Multi-start MAP: ``num_chains`` chain starting points (a pytree with a leading chain axis) and the best
    potential found."""
    k_init, k_jit = jax.random.split(key)
    pe = partial(potential_energy, model, (data,), {})
    z0 = jax.vmap(lambda k: prior_draw(model, k, data))(jax.random.split(k_init, settings.n_starts))
    if settings.opt_steps > 0:
        z_opt, v_opt = jax.vmap(lambda z: _optimize(pe, z, settings.opt_steps))(z0)
    else:  # plain prior draws (for comparison: `benchmarks/init.py`)
        z_opt, v_opt = z0, jnp.zeros(settings.n_starts)
    order = jnp.argsort(v_opt)
    best = order[0]
    # chains start at the best optima; ones far worse than the best (another, poorer mode) start at the best
    pick = order[np.arange(num_chains) % settings.n_starts]
    pick = jnp.where(v_opt[pick] - v_opt[best] < 5.0, pick, best)
    flat = jax.vmap(lambda i: ravel_pytree(jax.tree.map(lambda a: a[i], z_opt))[0])(pick)
    unravel = ravel_pytree(jax.tree.map(lambda a: a[0], z_opt))[1]
    return jax.vmap(unravel)(flat + 0.01 * jax.random.normal(k_jit, flat.shape)), v_opt[best]


def _sample_chains(pe, z_init, settings: SamplerSettings, dense: bool, progress: bool, n_dev: int, key, inv_mass,
                   counts: _Counts, room: int, sequential: bool = False):
    """NUTS warm-up and sampling of the chains (leading axis of ``z_init`` and ``inv_mass``, the program's room),
    split over devices, chain c on device c mod ``n_dev``; on each device vectorised (``vmap``: every chain of the
    room runs), or with ``sequential`` one after another (only the first ``counts.num_chains`` chains run).

    Returns draws with ``room`` places per chain, the first ``counts.num_samples`` filled, and sample statistics.
    """
    init_kernel, sample_kernel = hmc(potential_fn=pe, algo="NUTS")

    def chain(k, z, m, c):
        # warm-up 0 for NumPyro's kernel: the adaptation, with lengths known only when the program runs, is ours
        st = init_kernel(z, 0, inverse_mass_matrix=m, dense_mass=dense, max_tree_depth=settings.max_tree_depth,
                         rng_key=k)

        def record(st):
            return st.z, st.diverging, st.energy, st.num_steps, st.accept_prob, st.potential_energy

        def step(i, carry):
            st, kept = carry
            st = sample_kernel(st)
            st = st._replace(adapt_state=jax.lax.cond(
                i < c.plan.num_warmup,
                lambda: adaptation.update(i, st.accept_prob, st.z, st.adapt_state, c.plan, dense),
                lambda: st.adapt_state))
            j = jnp.maximum(i - c.plan.num_warmup, 0)  # warm-up transitions are not kept
            keep = i >= c.plan.num_warmup
            kept = jax.tree.map(lambda a, v: a.at[j].set(jnp.where(keep, v, a[j])), kept, record(st))
            if progress:
                jax.lax.cond(i % 50 == 49, lambda: jax.debug.callback(_progress_update, i), lambda: None)
            return st, kept

        kept = jax.tree.map(lambda v: jnp.zeros((room, *jnp.shape(v)), jnp.result_type(v)), record(st))
        st, kept = jax.lax.fori_loop(0, c.plan.num_warmup + c.num_samples, step, (st, kept))
        return kept, st.adapt_state.step_size

    def one(tree, k):
        return jax.tree.map(lambda a: a[k], tree)

    if sequential:  # one chain after another on each device: a single NUTS loop to trace, not a batched one
        def chains(ks, zs, ms, c):
            d = jax.lax.axis_index("chain") if n_dev > 1 else 0
            active = jnp.maximum(c.num_chains - d + n_dev - 1, 0) // n_dev  # chains d, d + n_dev, ... run
            shapes = jax.eval_shape(chain, ks[0], one(zs, 0), one(ms, 0), c)
            out = jax.tree.map(lambda s: jnp.zeros((ks.shape[0], *s.shape), s.dtype), shapes)

            def body(k, out):
                return jax.tree.map(lambda a, v: a.at[k].set(v), out, chain(ks[k], one(zs, k), one(ms, k), c))

            return jax.lax.fori_loop(0, active, body, out)
    else:
        chains = jax.vmap(chain, in_axes=(0, 0, 0, None))
    if n_dev > 1:
        mesh = Mesh(np.array(jax.local_devices()[:n_dev]), ("chain",))
        split = PartitionSpec("chain")
        chains = jax.shard_map(chains, mesh=mesh, in_specs=(split, split, split, PartitionSpec()), out_specs=split,
                               check_vma=False)
    n = jax.tree.leaves(z_init)[0].shape[0]
    slots = np.arange(n).reshape(-1, n_dev).T.ravel()  # device d's block holds chains d, d + n_dev, ...
    (z, div, energy, nsteps, acc, pot), step_size = jax.tree.map(
        lambda a: a[np.argsort(slots)],
        chains(*jax.tree.map(lambda a: a[slots], (jax.random.split(key, n), z_init, inv_mass)), counts))
    stats = {"diverging": div, "energy": energy, "n_steps": nsteps, "acceptance_rate": acc, "lp": -pot,
             "step_size": jnp.broadcast_to(step_size[:, None], acc.shape)}
    return z, stats


def _outputs(model, data, z):
    samples = jax.vmap(jax.vmap(lambda zz: constrain_fn(model, (data,), {}, zz)))(z)
    return samples, log_likelihood(model, samples, data, batch_ndims=2)["y"]


def _one_curve(model, settings: SamplerSettings, dense: bool, progress: bool, n_dev: int, sequential: bool,
               room: tuple[int, int], key, data, counts):
    k_start, k_chain = jax.random.split(key)
    pe = partial(potential_energy, model, (data,), {})
    inits, v_best = _starts(model, settings, room[0], k_start, data)
    if settings.laplace_mass and settings.opt_steps > 0:
        inv_mass = jax.vmap(lambda z: _laplace(pe, z)[0 if dense else 1])(inits)
    else:
        inv_mass = None
    z, stats = _sample_chains(pe, inits, settings, dense, progress, n_dev, k_chain, inv_mass, counts, room[1],
                              sequential)
    samples, ll = _outputs(model, data, z)
    return samples, ll, stats, v_best


def _joint(model, settings: SamplerSettings, progress: bool, n_dev: int, room: tuple[int, int], keys, data, counts):
    """One NUTS run over all curves of a batch, each curve whitened by its Laplace approximation.

    Curve b's parameters are z_b = m_b + S_b u_b (m_b its MAP, S_b S_b^T its Laplace covariance), and NUTS samples
    all u_b together with a diagonal mass matrix: one trajectory per chain instead of one per curve and chain, so
    the batch does not wait for its slowest lane. The curves stay independent a posteriori (the joint potential is
    a sum); the step size and tree depth are shared, so one badly shaped curve slows, or makes diverge, the batch.
    """
    k_start, k_chain = jax.vmap(lambda k: jax.random.split(k))(keys).transpose(1, 0, 2)

    def pe_one(z, d):
        return potential_energy(model, (d,), {}, z)

    inits, v_best = jax.vmap(partial(_starts, model, settings, room[0]))(k_start, data)  # leaves (curve, chain, ...)
    unravel = ravel_pytree(jax.tree.map(lambda a: a[0, 0], inits))[1]
    flat = jax.vmap(jax.vmap(lambda z: ravel_pytree(z)[0]))(inits)  # (curve, chain, d)
    centre = flat[:, 0]
    sqrt = jax.vmap(lambda m, d: _laplace(lambda z: pe_one(z, d), unravel(m))[2])(centre, data)  # (curve, d, d)

    def to_z(u):  # (curve, d) -> flat z (curve, d)
        return centre + jnp.einsum("bij,bj->bi", sqrt, u)

    def pe(u):
        return jnp.sum(jax.vmap(lambda f, d: pe_one(unravel(f), d))(to_z(u), data))

    u0 = jnp.swapaxes(jax.vmap(lambda s, f, m: jnp.linalg.solve(s, (f - m).T).T)(sqrt, flat, centre), 0, 1)
    # u (chain, draw, curve, d)
    u, stats = _sample_chains(pe, u0, settings, False, progress, n_dev, k_chain[0], None, counts, room[1])
    z = jax.vmap(jax.vmap(to_z))(u)  # (chain, draw, curve, d)

    def per_curve(zc, d):  # zc (chain, draw, d)
        samples, ll = _outputs(model, d, jax.vmap(jax.vmap(unravel))(zc))
        lp = -jax.vmap(jax.vmap(lambda f: pe_one(unravel(f), d)))(zc)
        return samples, ll, lp

    samples, ll, lp = jax.vmap(per_curve, in_axes=(2, 0))(z, data)
    n_curves = lp.shape[0]
    stats = {k: jnp.broadcast_to(v, (n_curves, *v.shape)) for k, v in stats.items()}
    stats["lp"] = lp
    return samples, ll, stats, v_best


@partial(jax.jit, static_argnames=("model", "settings", "dense", "batched", "progress", "n_dev", "room", "joint",
                                   "sequential"))
def _run(model, settings, dense, batched, progress, n_dev, room, keys, data, counts, joint=False, sequential=False):
    if joint:
        return _joint(model, settings, progress, n_dev, room, keys, data, counts)
    f = partial(_one_curve, model, settings, dense, progress, n_dev, sequential, room)
    return jax.vmap(f, in_axes=(0, 0, None))(keys, data, counts) if batched else f(keys, data, counts)


def _program(model, settings: SamplerSettings, n_params: int, batched: bool, steps: bool, joint: bool,
             program: str | None):
    """The run of ``settings`` (a function of key, data and :class:`_Counts`), the tag of its saved program (None:
    traced in every process) and its device count.

    Only what shapes the program is in the tag: warm-up length, draws, chains (up to the program's room, see
    :func:`_room`) and the target acceptance are inputs. On CPUs each curve's chains run one after another on each
    device: no batched NUTS loop to trace (seconds of a first fit) and no chain waiting in lock step for the longest
    trajectory (fit_many of the 72 IC curves 264 -> 163 s, benchmarks/speed.py); accelerators, and joint batches
    (one trajectory per chain), stay vectorised.
    """
    chains, draws, n_dev = _room(settings, batched)
    dense = settings.dense_mass if settings.dense_mass is not None else n_params <= 12
    shape = replace(settings, num_chains=1, num_warmup=0, num_samples=1, target_accept=0.5)  # lengths: inputs
    run = partial(_run, model, shape, dense, batched, steps, n_dev, (chains, draws), joint=bool(joint and batched),
                  sequential=not (joint and batched) and jax.default_backend() == "cpu")
    tag = None if program is None or steps else repr((program, shape, (chains, draws), dense, batched, joint))
    return run, tag, n_dev


def run_nuts(model, data, key, settings: SamplerSettings, n_params: int, batched: bool = False,
             progress: bool | None = None, label: str = "NUTS", joint: bool = False, program: str | None = None):
    """Sample ``model`` given ``data`` (a pytree; with ``batched`` every leaf has a leading curve axis).

    Returns numpy dicts: constrained samples (chain, draw, ...), pointwise log-likelihood, sample stats, and the
    best MAP potential found during initialisation. ``joint`` (with ``batched``) samples the batch's curves in one
    Laplace-whitened NUTS run (:func:`_joint`) instead of one NUTS per curve. ``program``: a name for ``model``
    that says all it depends on besides bayescale's code (:mod:`bayescale.programs` then keeps its traced
    program on disk); None: traced in every process. ``progress``: True, a bar advanced from inside the program
    (a host callback, so the program is traced anew); None, on a terminal the same where ``program`` is None,
    else a bar for the whole run (the saved program has no callback); False, none.
    """
    config.setup()  # compilation cache and CPU devices, once per process
    steps = bool(progress) if progress is not None else sys.stderr.isatty() and program is None
    whole = progress is None and sys.stderr.isatty() and not steps
    _BAR.clear()
    _BAR.update(total=settings.num_warmup + settings.num_samples, label=label)
    if batched and np.ndim(key) == 1:  # one key for the batch: split it per curve
        key = jax.random.split(key, jax.tree.leaves(data)[0].shape[0])
    counts = _Counts(adaptation.schedule(settings.num_warmup, settings.target_accept),
                     np.int32(settings.num_samples), np.int32(settings.num_chains))
    try:
        run, tag, n_dev = _program(model, settings, n_params, batched, steps, joint, program)
        if whole:
            _progress_update(-1)
        samples, ll, stats, v_best = jax.tree.map(np.asarray, programs.call(run, tag, key, data, counts, n_dev=n_dev))
        if whole:
            _progress_update(_BAR["total"] - 1)
    finally:
        if "bar" in _BAR:
            _BAR.pop("bar").close()
    kept = (slice(None),) * batched + (slice(settings.num_chains), slice(settings.num_samples))
    samples, ll, stats = jax.tree.map(lambda a: a[kept].copy(), (samples, ll, stats))  # the room's rest dropped
    return samples, ll, stats, v_best
