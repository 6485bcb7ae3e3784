"""NUTS warm-up adaptation with its lengths as program inputs (``bayescale.adaptation``): step for step what
NumPyro's own adapter, built for one warm-up length, returns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.hmc_util import IntegratorState, build_adaptation_schedule, warmup_adapter

from bayescale import adaptation


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("num_warmup", [1, 19, 20, 149, 150, 400])
def test_the_adaptation_with_run_time_lengths_is_numpyros(num_warmup, dense):
    d, target = 3, 0.85
    rng = np.random.default_rng(num_warmup)
    scale = np.array([1.0, 10.0, 0.1])
    wa_init, wa_update = warmup_adapter(num_warmup, dense_mass=dense, target_accept_prob=target)
    theirs = wa_init(IntegratorState(jnp.zeros(d), None, 0.0, jnp.zeros(d)), jax.random.PRNGKey(0), 0.1)
    ours = theirs
    plan = adaptation.schedule(num_warmup, target)
    ref = jax.jit(wa_update)
    step = jax.jit(adaptation.update, static_argnames="dense")
    for t in range(num_warmup):
        accept, z = rng.uniform(), rng.normal(size=d) * scale
        theirs = ref(t, accept, IntegratorState(z, None, 0.0, z), theirs)
        ours = step(t, accept, z, ours, plan, dense=dense)
        for name, a, b in zip(theirs._fields, theirs, ours):
            assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))), (t, name)
    assert ours.step_size != 0.1
    if num_warmup >= 150:  # windows have ended: the metric is the draws' (co)variance, not the identity
        var = np.diag(ours.inverse_mass_matrix) if dense else ours.inverse_mass_matrix
        assert np.all(np.diff(np.log(var)) * np.sign(np.diff(np.log(scale))) > 0)


def test_a_schedule_has_the_same_shapes_whatever_its_length():
    plans = [adaptation.schedule(n, 0.9) for n in (0, 10, 150, 1000, 100_000)]
    for arrays in zip(*plans):  # field by field
        assert len({np.shape(a) for a in arrays}) == 1
    for n in [*range(0, 400), 999, 1000, 4321, 100_000]:
        plan, windows = adaptation.schedule(n, 0.9), build_adaptation_schedule(n)
        assert plan.n_windows == len(windows) and int(plan.num_warmup) == n
        assert plan.window_ends.tolist() == [w.end for w in windows] + [-1] * (len(plan.window_ends) - len(windows))
    with pytest.raises(ValueError, match="num_warmup"):
        adaptation.schedule(10**300, 0.9)
