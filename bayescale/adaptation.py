"""NUTS warm-up adaptation whose lengths are inputs of the compiled program, not constants traced into it.

NumPyro's ``warmup_adapter`` builds its window schedule in Python from ``num_warmup``, so every warm-up length is
another program to trace and compile (seconds each): a fit and the refits behind its own leave-future-out errors
(fewer warm-up steps and draws) were two. Here the same adaptation takes the schedule as an array: Stan's windowed
scheme as NumPyro implements it (``build_adaptation_schedule``: a 75-step initial buffer, doubling windows from 25
steps, a 50-step final buffer, proportionally shorter under 150 steps), dual averaging of the log step size towards
``target_accept`` (its running average taken at the last warm-up step), and a Welford estimate of the (diagonal or
dense) covariance over each middle window, regularised as Stan does, becoming the inverse mass matrix at the
window's end, where dual averaging restarts at 10 times the current step size. Given the same inputs it returns
what NumPyro's ``warmup_adapter(num_warmup).update_fn`` returns (``tests/test_sampler.py``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.hmc_util import HMCAdaptState, build_adaptation_schedule, dual_averaging, welford_covariance

__all__ = ["Schedule", "schedule", "update"]

MAX_WINDOWS = 40  # windows double from 25 steps: 2**31 warm-up steps need fewer than 30


class Schedule(NamedTuple):
    """Warm-up lengths and adaptation windows, as arrays (inputs of a compiled sampler).

    ``window_ends[k]``: the last step of window k (-1 past ``n_windows``); ``target_accept``: the acceptance
    probability dual averaging aims at."""

    num_warmup: jax.Array
    window_ends: jax.Array
    n_windows: jax.Array
    target_accept: jax.Array


def schedule(num_warmup: int, target_accept: float) -> Schedule:
    """The adaptation schedule of ``num_warmup`` warm-up steps (NumPyro's windows, padded to a fixed length).

    Parameters
    ----------
    num_warmup : int
        Warm-up steps (>= 0).
    target_accept : float
        Target mean acceptance probability of the step-size adaptation, in (0, 1).

    Returns
    -------
    Schedule
        Numpy arrays of fixed shapes, whatever ``num_warmup`` is.
    """
    windows = build_adaptation_schedule(int(num_warmup))
    if len(windows) > MAX_WINDOWS:
        raise ValueError(f"num_warmup={num_warmup} needs {len(windows)} adaptation windows; at most {MAX_WINDOWS}")
    ends = np.full(MAX_WINDOWS, -1, dtype=np.int32)
    ends[:len(windows)] = [w.end for w in windows]
    return Schedule(np.int32(num_warmup), ends, np.int32(len(windows)), np.float64(target_accept))


def update(t, accept_prob, z, state: HMCAdaptState, plan: Schedule, dense: bool) -> HMCAdaptState:
    """The adaptation state after warm-up step ``t`` (0-based), whose transition ended at ``z`` (a pytree of
    unconstrained parameters) with mean acceptance probability ``accept_prob``.

    Parameters
    ----------
    t : int array
        The warm-up step just taken, ``0 <= t < plan.num_warmup`` (call it for warm-up steps only).
    accept_prob : float array
        The transition's mean acceptance probability.
    z : pytree
        The chain's position after the transition.
    state : numpyro.infer.hmc_util.HMCAdaptState
        The adaptation state the transition used (``HMCState.adapt_state``).
    plan : Schedule
        From :func:`schedule` (traced arrays inside a compiled program).
    dense : bool
        Whether the mass matrix is dense (a Python bool: it fixes the shapes).

    Returns
    -------
    numpyro.infer.hmc_util.HMCAdaptState
        Step size, inverse mass matrix and its square roots, the two estimators' states and the window index.
    """
    ss_init, ss_update = dual_averaging()
    mm_init, mm_update, mm_final = welford_covariance(diagonal=not dense)
    rng_key = jax.random.split(state.rng_key)[0]  # NumPyro splits off a key for its optional step-size search
    ss_state = ss_update(plan.target_accept - accept_prob, state.ss_state)
    log_step, log_step_avg, *_ = ss_state
    step_size = jnp.exp(jnp.where(t == plan.num_warmup - 1, log_step_avg, log_step))
    finfo = jnp.finfo(jnp.result_type(step_size))
    step_size = jnp.clip(step_size, finfo.tiny, finfo.max)
    middle = (0 < state.window_idx) & (state.window_idx < plan.n_windows - 1)
    mm_state = jax.lax.cond(middle, lambda: mm_update(z, state.mm_state), lambda: state.mm_state)
    at_end = t == plan.window_ends[state.window_idx]
    new = state._replace(step_size=step_size, ss_state=ss_state, mm_state=mm_state, rng_key=rng_key,
                         window_idx=jnp.where(at_end, state.window_idx + 1, state.window_idx))

    def window_end(s):  # the window's covariance becomes the metric; dual averaging restarts from 10x the step
        inv, sqrt, sqrt_inv = mm_final(s.mm_state, regularize=True)
        return s._replace(inverse_mass_matrix=inv, mass_matrix_sqrt=sqrt, mass_matrix_sqrt_inv=sqrt_inv,
                          mm_state=mm_init(inv.shape[-1]), ss_state=ss_init(jnp.log(10) + jnp.log(s.step_size)))

    return jax.lax.cond(at_end & middle, window_end, lambda s: s, new)
