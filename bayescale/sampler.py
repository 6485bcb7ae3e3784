"""NUTS for one curve or a batch of curves, compiled into three XLA programs run one after another: starting
points, chains, outputs (:func:`_program`).

``numpyro.infer.MCMC.run`` drives the NUTS kernel from Python between chunks; for models this small the runtime
overhead dominates, so here the kernel (``numpyro.infer.hmc.hmc``) runs inside one jitted loop, vmapped over
curves for :func:`bayescale.fit_many` and over chains on an accelerator or in a batch. The warm-up length, the
draws, the chains and the target acceptance are inputs of the chains' program, not constants traced into it (the
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


def _unravel(model, data):
    """The map from a flat vector to ``model``'s unconstrained parameters (a pytree), given one curve's data."""
    shapes = jax.eval_shape(lambda k: prior_draw(model, k, data), jax.random.PRNGKey(0))
    return ravel_pytree(jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))[1]


def _whitened(model, centre, sqrt, data):
    """Joint batches: z_b = m_b + S_b u_b for each curve b (m_b its MAP, S_b S_b^T its Laplace covariance) as a map
    of u (curve, d) to the curves' flat parameters, and the potential of u summed over the curves."""
    unravel = _unravel(model, jax.tree.map(lambda a: a[0], data))

    def to_z(u):
        return centre + jnp.einsum("bij,bj->bi", sqrt, u)

    def pe_one(f, d):
        return potential_energy(model, (d,), {}, unravel(f))

    def pe(u):
        return jnp.sum(jax.vmap(pe_one)(to_z(u), data))

    return to_z, pe_one, unravel, pe


def _start_one(model, settings: SamplerSettings, dense: bool, n_chains: int, key, data):
    """One curve's chain key, starting points (:func:`_starts`) and initial inverse mass matrices (the Laplace
    covariance at each start, or None), and the best MAP potential."""
    k_start, k_chain = jax.random.split(key)
    inits, v_best = _starts(model, settings, n_chains, k_start, data)
    inv_mass = None
    if settings.laplace_mass and settings.opt_steps > 0:
        pe = partial(potential_energy, model, (data,), {})
        inv_mass = jax.vmap(lambda z: _laplace(pe, z)[0 if dense else 1])(inits)
    return k_chain, (inits, inv_mass), v_best


def _start_joint(model, settings: SamplerSettings, n_chains: int, keys, data):
    """A joint batch's chain key and starting state: each curve's starts, its best optimum as the centre m_b and the
    square root S_b of the Laplace covariance there (:func:`_whitened`), the chains' starts in u; best potentials."""
    k_start, k_chain = jax.vmap(lambda k: jax.random.split(k))(keys).transpose(1, 0, 2)
    inits, v_best = jax.vmap(partial(_starts, model, settings, n_chains))(k_start, data)  # leaves (curve, chain, ...)
    unravel = _unravel(model, jax.tree.map(lambda a: a[0], data))
    flat = jax.vmap(jax.vmap(lambda z: ravel_pytree(z)[0]))(inits)  # (curve, chain, d)
    centre = flat[:, 0]
    sqrt = jax.vmap(lambda m, d: _laplace(partial(potential_energy, model, (d,), {}), unravel(m))[2])(centre, data)
    u0 = jnp.swapaxes(jax.vmap(lambda s, f, m: jnp.linalg.solve(s, (f - m).T).T)(sqrt, flat, centre), 0, 1)
    return k_chain[0], (u0, centre, sqrt), v_best


def _chains_one(model, settings: SamplerSettings, dense: bool, progress: bool, n_dev: int, sequential: bool,
                draws: int, key, state, data, counts):
    inits, inv_mass = state
    pe = partial(potential_energy, model, (data,), {})
    return _sample_chains(pe, inits, settings, dense, progress, n_dev, key, inv_mass, counts, draws, sequential)


def _chains_joint(model, settings: SamplerSettings, progress: bool, n_dev: int, draws: int, key, state, data,
                  counts):
    """One NUTS run over all curves of a batch, in the whitened u (chain, draw, curve, d) of :func:`_whitened`,
    with a diagonal mass matrix: one trajectory per chain instead of one per curve and chain, so the batch does not
    wait for its slowest lane. The curves stay independent a posteriori (the joint potential is a sum); the step
    size and tree depth are shared, so one badly shaped curve slows, or makes diverge, the batch."""
    u0, centre, sqrt = state
    pe = _whitened(model, centre, sqrt, data)[3]
    return _sample_chains(pe, u0, settings, False, progress, n_dev, key, None, counts, draws)


def _outputs(model, data, z):
    samples = jax.vmap(jax.vmap(lambda zz: constrain_fn(model, (data,), {}, zz)))(z)
    return samples, log_likelihood(model, samples, data, batch_ndims=2)["y"]


def _outputs_joint(model, u, state, data):
    """Each curve's constrained draws, pointwise log-likelihood and log density from a joint run's u."""
    _, centre, sqrt = state
    to_z, pe_one, unravel, _ = _whitened(model, centre, sqrt, data)
    z = jax.vmap(jax.vmap(to_z))(u)  # (chain, draw, curve, d)

    def per_curve(zc, d):  # zc (chain, draw, d)
        samples, ll = _outputs(model, d, jax.vmap(jax.vmap(unravel))(zc))
        return samples, ll, -jax.vmap(jax.vmap(lambda f: pe_one(f, d)))(zc)

    return jax.vmap(per_curve, in_axes=(2, 0))(z, data)


_STATIC = ("model", "settings", "dense", "batched", "joint", "progress", "n_dev", "room", "sequential")


@partial(jax.jit, static_argnames=_STATIC)
def _start(keys, data, *, model, settings, dense, batched, joint, room, **_):
    if joint:
        return _start_joint(model, settings, room[0], keys, data)
    f = partial(_start_one, model, settings, dense, room[0])
    return jax.vmap(f)(keys, data) if batched else f(keys, data)


@partial(jax.jit, static_argnames=_STATIC)
def _chains(key, state, data, counts, *, model, settings, dense, batched, joint, progress, n_dev, room, sequential):
    if joint:
        return _chains_joint(model, settings, progress, n_dev, room[1], key, state, data, counts)
    f = partial(_chains_one, model, settings, dense, progress, n_dev, sequential, room[1])
    return jax.vmap(f, in_axes=(0, 0, 0, None))(key, state, data, counts) if batched else f(key, state, data, counts)


@partial(jax.jit, static_argnames=_STATIC)
def _finish(z, state, data, *, model, batched, joint, **_):
    if joint:
        return _outputs_joint(model, z, state, data)
    return jax.vmap(partial(_outputs, model))(data, z) if batched else _outputs(model, data, z)


def _program(model, settings: SamplerSettings, n_params: int, batched: bool, steps: bool, joint: bool,
             program: str | None):
    """The three programs of a run of ``settings``, run one after another: starting points (:func:`_start`), NUTS
    chains (:func:`_chains`, a function of :class:`_Counts` too) and outputs (:func:`_finish`), each with the tag
    of its saved program (None: traced in every process); and the chains' device count.

    Three programs, not one: XLA's compile time grows faster than the program (a first M4 fit compiled in 0.83x
    the time of one program, and a process holds less memory having loaded the three: ``benchmarks/RESULTS.md``, "A
    first fit with an empty compilation cache"), and the starting and output programs do not depend on NUTS'
    settings or on a progress bar. Only what shapes a program is in its tag: warm-up length, draws, chains (up to
    the program's room, see :func:`_room`) and the target acceptance are inputs. On CPUs each curve's chains run
    one after another on each device: no batched NUTS loop to trace (seconds of a first fit) and no chain waiting
    in lock step for the longest trajectory (fit_many of the 72 IC curves 264 -> 163 s, benchmarks/speed.py);
    accelerators, and joint batches (one trajectory per chain), stay vectorised.
    """
    chains, draws, n_dev = _room(settings, batched)
    dense = settings.dense_mass if settings.dense_mass is not None else n_params <= 12
    shape = replace(settings, num_chains=1, num_warmup=0, num_samples=1, target_accept=0.5)  # lengths: inputs
    joint = bool(joint and batched)
    static = dict(model=model, settings=shape, dense=dense, batched=batched, joint=joint, progress=steps,
                  n_dev=n_dev, room=(chains, draws), sequential=not joint and jax.default_backend() == "cpu")
    start_shape = replace(shape, max_tree_depth=0, dense_mass=None)  # NUTS' own settings do not shape the starts
    tags = {"start": (start_shape, chains, dense, batched, joint),
            "chains": (shape, (chains, draws), dense, batched, joint, n_dev),
            "finish": (batched, joint)}
    runs = {"start": partial(_start, **static), "chains": partial(_chains, **static),
            "finish": partial(_finish, **static)}
    named = {k: None if program is None or (steps and k == "chains") else repr((program, k, *tags[k])) for k in tags}
    return runs, named, n_dev


def _host(tree):
    """Outputs of one program as numpy arrays, inputs of the next (a program compiled for one device refuses arrays
    placed on several)."""
    return jax.tree.map(np.asarray, tree)


def run_nuts(model, data, key, settings: SamplerSettings, n_params: int, batched: bool = False,
             progress: bool | None = None, label: str = "NUTS", joint: bool = False, program: str | None = None):
    """Sample ``model`` given ``data`` (a pytree; with ``batched`` every leaf has a leading curve axis).

    Returns numpy dicts: constrained samples (chain, draw, ...), pointwise log-likelihood, sample stats, and the
    best MAP potential found during initialisation. ``joint`` (with ``batched``) samples the batch's curves in one
    Laplace-whitened NUTS run (:func:`_chains_joint`) instead of one NUTS per curve. ``program``: a name for ``model``
    that says all it depends on besides bayescale's code (:mod:`bayescale.programs` then keeps its traced
    programs on disk); None: traced in every process. ``progress``: True, a bar advanced from inside the chains'
    program (a host callback, so that program is traced anew); None, on a terminal the same where ``program`` is None,
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
        runs, tags, n_dev = _program(model, settings, n_params, batched, steps, joint, program)
        k_chain, state, v_best = _host(programs.call(runs["start"], tags["start"], key, data))
        if whole:
            _progress_update(-1)
        z, stats = _host(programs.call(runs["chains"], tags["chains"], k_chain, state, data, counts, n_dev=n_dev))
        if whole:
            _progress_update(_BAR["total"] - 1)
        joint = bool(joint and batched)  # the state the outputs need: a joint run's whitening
        samples, ll, *lp = _host(programs.call(runs["finish"], tags["finish"], z, state if joint else (), data))
    finally:
        if "bar" in _BAR:
            _BAR.pop("bar").close()
    if lp:  # a joint batch: each curve's own log density, and the shared chains' statistics for each curve
        stats = {k: np.broadcast_to(v, (lp[0].shape[0], *v.shape)) for k, v in stats.items()} | {"lp": lp[0]}
    kept = (slice(None),) * batched + (slice(settings.num_chains), slice(settings.num_samples))
    samples, ll, stats = jax.tree.map(lambda a: a[kept].copy(), (samples, ll, stats))  # the room's rest dropped
    return samples, ll, stats, v_best
